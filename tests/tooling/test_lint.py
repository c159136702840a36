"""The series lint catches what would make the series unmaintainable."""
from semiring_tool import series


def first_patch(patches):
    return patches / series.read_series(patches / "series")[0]


def test_project_series_is_clean():
    assert series.lint() == []


def test_malformed_patch(patches_copy):
    first_patch(patches_copy).write_text("this is not a patch\n")
    problems = series.lint(patches_copy)
    assert any("does not parse" in p for p in problems), problems


def test_unlisted_patch(patches_copy):
    (patches_copy / "9999-stray.patch").write_text(first_patch(patches_copy).read_text())
    assert "9999-stray.patch: not listed in series" in series.lint(patches_copy)


def test_listed_but_missing_and_duplicate(patches_copy):
    series_file = patches_copy / "series"
    first = series.read_series(series_file)[0]
    series_file.write_text(series_file.read_text() + f"{first}\nnope.patch\n")
    problems = series.lint(patches_copy)
    assert f"series: '{first}' is listed twice" in problems
    assert "series: 'nope.patch' is listed but does not exist" in problems


def test_missing_header_field(patches_copy):
    p = first_patch(patches_copy)
    p.write_text("".join(l for l in p.read_text().splitlines(True) if not l.startswith("Upstream-Status:")))
    assert f"{p.name}: missing header field 'Upstream-Status:'" in series.lint(patches_copy)


def test_header_value_not_allowed(patches_copy):
    p = first_patch(patches_copy)
    p.write_text(p.read_text().replace("Forwarded: not-needed", "Forwarded: maybe later", 1))
    assert any("'Forwarded: maybe later' is not one of the allowed values" in x for x in series.lint(patches_copy))


def test_trailing_whitespace_in_added_line(patches_copy):
    p = first_patch(patches_copy)
    text = p.read_text()
    i = text.index("\n+set(")
    p.write_text(text[: i + 1] + text[i + 1 :].replace("\n", "   \n", 1))
    assert any("trailing whitespace" in x for x in series.lint(patches_copy))


def test_description_required(patches_copy):
    p = first_patch(patches_copy)
    head, sep, rest = p.read_text().partition("\nOrigin:")
    subject_end = head.index("\n\n", head.index("Subject:"))
    p.write_text(head[: subject_end + 2] + sep.lstrip("\n") + rest)
    assert any("no description" in x for x in series.lint(patches_copy))


def test_status_table_is_current():
    text = series.STATUS_DOC.read_text()
    assert "<!-- status:begin -->" in text
    assert series.with_status(text) == text, "run: python3 scripts/semiring status --write"
