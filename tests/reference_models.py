"""The reference models of the semiring work: random weights, nothing downloaded.

Shared by the tests (tests/feature/test_reference_models.py), the coverage report
(`scripts/semiring model-coverage`) and the benchmarks in benchmarks/. Each entry of MODELS
builds a model and a batch and returns the scalar loss whose backward is studied, and the
tensors it is taken with respect to (the model's parameters and float inputs).

The torch.nn models are written the way research code writes them (nn.Linear, F.* calls,
masks by masked_fill, heads by view/transpose); the Hugging Face ones are the library's own
classes built from small configs, with the "eager" and "sdpa" attention implementations.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class Built:
    loss: Tensor
    inputs: list[Tensor]  # what grad() is taken with respect to


# -- torch.nn models -------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, width: int = 16, depth: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=2, dilation=2, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class CNN(nn.Module):
    """conv1d and conv2d with stride, padding, dilation and groups; max, average and adaptive
    average pooling; batch norm; a residual block."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.seq = nn.Conv1d(3, 4, 3, stride=2, padding=1)
        self.stem = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.block = ResidualBlock(4)
        self.grouped = nn.Conv2d(4, 8, 3, padding=1, groups=2)
        self.head = nn.Linear(8 + 4, classes)

    def forward(self, image: Tensor, signal: Tensor) -> Tensor:
        x = F.relu(self.bn(self.stem(image)))
        x = F.max_pool2d(x, 2, stride=1, padding=1)
        x = self.block(x)
        x = F.avg_pool2d(self.grouped(x), 2)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        s = F.relu(self.seq(signal)).mean(-1)
        return self.head(torch.cat([x, s], 1))


@dataclass(frozen=True)
class BertShape:
    """bert_uncased_L-6_H-512_A-8 by default."""

    layers: int = 6
    hidden: int = 512
    heads: int = 8
    intermediate: int = 2048
    vocab: int = 30522
    positions: int = 512
    types: int = 2


class BertLayer(nn.Module):
    def __init__(self, s: BertShape) -> None:
        super().__init__()
        self.heads = s.heads
        self.qkv = nn.Linear(s.hidden, 3 * s.hidden)
        self.out = nn.Linear(s.hidden, s.hidden)
        self.ln1 = nn.LayerNorm(s.hidden)
        self.up = nn.Linear(s.hidden, s.intermediate)
        self.down = nn.Linear(s.intermediate, s.hidden)
        self.ln2 = nn.LayerNorm(s.hidden)

    def forward(self, x: Tensor, pad: Tensor) -> Tensor:
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads)
        scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class BertEncoder(nn.Module):
    """Word, position and token-type embeddings, layer norm, attention with a padding mask,
    GELU, the pooler's tanh and a cross-entropy classification head."""

    def __init__(self, s: BertShape = BertShape(), classes: int = 3) -> None:
        super().__init__()
        self.word = nn.Embedding(s.vocab, s.hidden)
        self.position = nn.Embedding(s.positions, s.hidden)
        self.token_type = nn.Embedding(s.types, s.hidden)
        self.ln = nn.LayerNorm(s.hidden)
        self.layers = nn.ModuleList(BertLayer(s) for _ in range(s.layers))
        self.pooler = nn.Linear(s.hidden, s.hidden)
        self.classifier = nn.Linear(s.hidden, classes)

    def forward(self, ids: Tensor, types: Tensor, pad: Tensor, labels: Tensor) -> Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.word(ids) + self.position(positions) + self.token_type(types))
        for layer in self.layers:
            x = layer(x, pad)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return F.cross_entropy(self.classifier(pooled), labels)


class GPTDecoder(nn.Module):
    """Causal self-attention through F.scaled_dot_product_attention, a next-token loss."""

    def __init__(self, vocab: int = 64, hidden: int = 32, heads: int = 4, layers: int = 2,
                 positions: int = 32) -> None:
        super().__init__()
        self.heads = heads
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList(
            nn.ModuleDict(dict(ln1=nn.LayerNorm(hidden), qkv=nn.Linear(hidden, 3 * hidden),
                               proj=nn.Linear(hidden, hidden), ln2=nn.LayerNorm(hidden),
                               up=nn.Linear(hidden, 4 * hidden), down=nn.Linear(4 * hidden, hidden)))
            for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        b, t = ids.shape
        x = self.word(ids) + self.position(torch.arange(t, device=ids.device))
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).split(x.shape[-1], dim=-1)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk["proj"](a.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["down"](F.gelu(blk["up"](blk["ln2"](x)), approximate="tanh"))
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """RMS norm, rotary position embeddings by slicing, cat and neg, a SiLU-gated MLP and
    grouped-query attention by expand and reshape."""

    def __init__(self, hidden: int = 32, heads: int = 4, kv_heads: int = 2, vocab: int = 64) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.dim = heads, kv_heads, hidden // heads
        self.embed = nn.Embedding(vocab, hidden)
        self.norm1 = nn.RMSNorm(hidden)
        self.q = nn.Linear(hidden, heads * self.dim, bias=False)
        self.kv = nn.Linear(hidden, 2 * kv_heads * self.dim, bias=False)
        self.o = nn.Linear(heads * self.dim, hidden, bias=False)
        self.norm2 = nn.RMSNorm(hidden)
        self.gate = nn.Linear(hidden, 2 * hidden, bias=False)
        self.up = nn.Linear(hidden, 2 * hidden, bias=False)
        self.down = nn.Linear(2 * hidden, hidden, bias=False)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        b, t = ids.shape
        x = self.embed(ids)
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.dim).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.dim).permute(2, 0, 3, 1, 4)
        inv = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, dtype=x.dtype) / self.dim))
        freqs = torch.outer(torch.arange(t, dtype=x.dtype), inv)
        cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k, v = (z[:, :, None].expand(b, self.kv_heads, group, t, self.dim).reshape(b, self.heads, t, self.dim)
                for z in (k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dim)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        attn = scores.masked_fill(causal, float("-inf")).softmax(-1)
        x = x + self.o((attn @ v).transpose(1, 2).reshape(b, t, -1))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return F.cross_entropy(self.head(x)[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


# -- the models users bring: vision, recurrent ------------------------------------------


class SmallResNet(nn.Module):
    """A stem, two stages of basic blocks (the second strided with a 1x1 projection), global
    average pooling and a classifier, as torchvision's ResNet writes it."""

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Tensor) -> Tensor:
            y = F.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    def __init__(self, classes: int = 5, width: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(self.Block(width, width, 1), self.Block(width, 2 * width, 2))
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1).flatten(1))


class UNet(nn.Module):
    """Two levels: strided convolutions down, a transposed convolution and a bilinear
    upsampling up, skip connections by concatenation."""

    def __init__(self, channels: int = 3, width: int = 8) -> None:
        super().__init__()
        self.enc1 = nn.Conv2d(channels, width, 3, padding=1)
        self.enc2 = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1)
        self.up1 = nn.ConvTranspose2d(2 * width, 2 * width, 2, stride=2)
        self.dec1 = nn.Conv2d(4 * width, width, 3, padding=1)
        self.dec2 = nn.Conv2d(2 * width, width, 3, padding=1)
        self.head = nn.Conv2d(width, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        e1 = F.relu(self.enc1(x))
        e2 = F.relu(self.enc2(e1))
        m = F.relu(self.mid(e2))
        d1 = F.relu(self.dec1(torch.cat([self.up1(m), e2], 1)))
        up = F.interpolate(d1, scale_factor=2, mode="bilinear", align_corners=False)
        d2 = F.relu(self.dec2(torch.cat([up, e1], 1)))
        return self.head(d2)


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab: int = 32, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, num_layers=2, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, ids: Tensor) -> Tensor:
        h, _ = self.lstm(self.embed(ids[:, :-1]))
        logits = self.out(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


class GRUClassifier(nn.Module):
    """An Elman RNN layer (ReLU) under a bidirectional GRU, classifying from the GRU's final
    states."""

    def __init__(self, vocab: int = 32, width: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.RNN(width, width, nonlinearity="relu", batch_first=True)
        self.gru = nn.GRU(width, width, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * width, classes)

    def forward(self, ids: Tensor, labels: Tensor) -> Tensor:
        _, h = self.gru(self.rnn(self.embed(ids))[0])
        return F.cross_entropy(self.out(torch.cat([h[0], h[1]], -1)), labels)


# -- builders --------------------------------------------------------------------------------


def _float_leaves(model: nn.Module, *tensors: Tensor) -> list[Tensor]:
    return [p for p in model.parameters() if p.requires_grad] + [t for t in tensors if t.requires_grad]


def _randn(*shape: int, dtype: torch.dtype) -> Tensor:
    # Drawn in float32 and converted, so that the float32 and float64 runs see the same values.
    return torch.randn(*shape, dtype=torch.float32).to(dtype).requires_grad_()


def _eval_statistics(model: nn.Module) -> None:
    """Gives the batch norms' eval mode running statistics that are not the identity."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)


def build_mlp(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = MLP().to(dtype)
    x = _randn(8, 16, dtype=dtype)
    return Built(model(x).sum(), _float_leaves(model, x))


def build_cnn(dtype: torch.dtype, seed: int = 0, train: bool = True) -> Built:
    torch.manual_seed(seed)
    model = CNN().train(train)
    if not train:
        _eval_statistics(model)
    model = model.to(dtype)
    image = _randn(2, 3, 12, 12, dtype=dtype)
    signal = _randn(2, 3, 10, dtype=dtype)
    out = model(image, signal)
    return Built(F.cross_entropy(out, torch.tensor([1, 3])), _float_leaves(model, image, signal))


def bert_batch(shape: BertShape, batch: int, seq: int, seed: int = 0) -> tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, shape.vocab, (batch, seq), generator=g)
    ids[:, 1] = ids[:, 2]  # a repeated token: embedding rows that receive several paths
    types = (torch.arange(seq) >= seq // 2).long().expand(batch, seq)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    pad = torch.arange(seq)[None, :] >= lengths[:, None]
    labels = torch.randint(0, 3, (batch,), generator=g)
    return ids, types, pad, labels


SMALL_BERT = BertShape(layers=2, hidden=32, heads=4, intermediate=64, vocab=50, positions=16)
# Twelve layers: where path sums leave float32's range first.
DEEP_BERT = BertShape(layers=12, hidden=32, heads=4, intermediate=64, vocab=50, positions=16)


def bert_model(dtype: torch.dtype, shape: BertShape = SMALL_BERT, batch: int = 2, seq: int = 8,
               seed: int = 0) -> tuple[BertEncoder, tuple[Tensor, ...]]:
    """The BERT-style encoder with seeded random weights, and a batch for it (the benchmarks
    run its forward again for every measured backward)."""
    torch.manual_seed(seed)
    return BertEncoder(shape).to(dtype), bert_batch(shape, batch, seq, seed)


def build_bert(dtype: torch.dtype, seed: int = 0, shape: BertShape = SMALL_BERT, batch: int = 2,
               seq: int = 8) -> Built:
    model, data = bert_model(dtype, shape, batch, seq, seed)
    return Built(model(*data), _float_leaves(model))


def _token_ids(vocab: int, batch: int, seq: int, seed: int) -> Tensor:
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))
    ids[:, 1] = ids[:, 3]
    return ids


def build_gpt(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = GPTDecoder().to(dtype)
    return Built(model(_token_ids(64, 2, 8, seed)), _float_leaves(model))


def build_llama(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = LlamaBlock().to(dtype)
    return Built(model(_token_ids(64, 2, 8, seed)), _float_leaves(model))


def build_resnet(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = SmallResNet().eval()
    _eval_statistics(model)
    model = model.to(dtype)
    image = _randn(2, 3, 16, 16, dtype=dtype)
    return Built(F.cross_entropy(model(image), torch.tensor([1, 3])), _float_leaves(model, image))


def build_unet(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = UNet().to(dtype)
    image = _randn(2, 3, 16, 16, dtype=dtype)
    return Built(model(image).pow(2).mean(), _float_leaves(model, image))


def build_lstm(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = LSTMLanguageModel().to(dtype)
    return Built(model(_token_ids(32, 2, 9, seed)), _float_leaves(model))


def build_gru(dtype: torch.dtype, seed: int = 0) -> Built:
    torch.manual_seed(seed)
    model = GRUClassifier().to(dtype)
    return Built(model(_token_ids(32, 2, 9, seed), torch.tensor([0, 2])), _float_leaves(model))


def _hf_model(kind: str, attention: str) -> nn.Module:
    """A small, randomly initialised Hugging Face model of the family `kind`."""
    import transformers as T

    a = dict(attn_implementation=attention)
    enc = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               max_position_embeddings=40, **a)
    dec = dict(enc, num_key_value_heads=2)
    seq2seq = dict(vocab_size=64, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, **a)
    image = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    makers: dict[str, Callable[[], nn.Module]] = {
        "bert": lambda: T.BertModel(T.BertConfig(**enc)),
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                                                       n_positions=32, **a)),
        "llama": lambda: T.LlamaForCausalLM(T.LlamaConfig(**dec)),
        "roberta": lambda: T.RobertaModel(T.RobertaConfig(**enc)),
        "distilbert": lambda: T.DistilBertModel(T.DistilBertConfig(
            vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=40, **a)),
        "albert": lambda: T.AlbertModel(T.AlbertConfig(**enc, embedding_size=16)),
        "electra": lambda: T.ElectraModel(T.ElectraConfig(**enc, embedding_size=16)),
        "gpt-neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**enc, rotary_pct=0.5)),
        "mistral": lambda: T.MistralForCausalLM(T.MistralConfig(**dec, sliding_window=None)),
        "qwen2": lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**dec, sliding_window=None)),
        "gemma": lambda: T.GemmaForCausalLM(T.GemmaConfig(**dec, head_dim=8)),
        "phi": lambda: T.PhiForCausalLM(T.PhiConfig(**dec)),
        "t5": lambda: T.T5ForConditionalGeneration(T.T5Config(
            vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
            pad_token_id=0, **a)),
        "bart": lambda: T.BartForConditionalGeneration(T.BartConfig(**seq2seq, max_position_embeddings=40)),
        "vit": lambda: T.ViTModel(T.ViTConfig(image_size=16, patch_size=4, **image, **a)),
        "resnet": lambda: T.ResNetModel(T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                                       layer_type="basic")),
        "whisper": lambda: T.WhisperModel(T.WhisperConfig(
            **seq2seq, num_mel_bins=8, max_source_positions=8, max_target_positions=16, pad_token_id=0,
            bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).encoder,
    }
    return makers[kind]()


def _hf(kind: str, attention: str) -> Callable[[torch.dtype, int], Built]:
    def build(dtype: torch.dtype, seed: int = 0) -> Built:
        torch.manual_seed(seed)
        # eval(): no dropout, so that the graph is deterministic (and attention runs without
        # dropout, which the CPU flash attention rule refuses).
        model = _hf_model(kind, attention).to(dtype).eval()
        # transformers 4.51 builds GPT-2's causal mask in the default dtype, then fills it
        # with the model dtype's minimum, which overflows float32 for a float64 model.
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            loss, tensors = _hf_loss(kind, model, dtype, seed)
            return Built(loss, _float_leaves(model, *tensors))
        finally:
            torch.set_default_dtype(previous)

    return build


def _hf_loss(kind: str, model: nn.Module, dtype: torch.dtype, seed: int) -> tuple[Tensor, tuple[Tensor, ...]]:
    """The model's scalar loss on a seeded batch, and the float inputs it is taken against."""
    if kind in ("vit", "resnet"):
        pixels = _randn(2, 3, 16, 16, dtype=dtype)
        out = model(pixel_values=pixels)
        return out.last_hidden_state.pow(2).mean() + out.pooler_output.sum(), (pixels,)
    if kind == "whisper":  # the encoder, on log-mel features
        features = _randn(2, 8, 16, dtype=dtype)
        return model(features).last_hidden_state.pow(2).mean(), (features,)
    ids = _token_ids(64, 2, 8, seed)
    mask = torch.ones_like(ids)
    mask[1, -2:] = 0  # padding in the second sequence
    if kind in ("bert", "roberta", "distilbert", "albert", "electra"):
        extra = {"token_type_ids": (torch.arange(8) >= 4).long().expand_as(ids)} if kind == "bert" else {}
        out = model(input_ids=ids, attention_mask=mask, **extra)
        loss = out.last_hidden_state.pow(2).mean()
        if getattr(out, "pooler_output", None) is not None:
            loss = loss + out.pooler_output.sum()
        return loss, ()
    if kind in ("t5", "bart"):
        return model(input_ids=ids, attention_mask=mask, labels=ids.flip(1)).loss, ()
    return model(input_ids=ids, attention_mask=mask, labels=ids).loss, ()


# Hugging Face families and the attention implementations each has in the pinned transformers.
HF_MODELS = {
    **{kind: ("eager", "sdpa") for kind in ("bert", "gpt2", "llama", "roberta", "distilbert", "albert", "gpt-neox",
                                           "mistral", "qwen2", "gemma", "phi", "bart", "vit", "whisper")},
    "electra": ("eager",),
    "t5": ("eager",),
    "resnet": ("eager",),  # no attention
}


MODELS: dict[str, Callable[..., Built]] = {
    "mlp": build_mlp,
    "cnn-train": lambda dtype, seed=0: build_cnn(dtype, seed, train=True),
    "cnn-eval": lambda dtype, seed=0: build_cnn(dtype, seed, train=False),
    "bert": build_bert,
    "gpt": build_gpt,
    "llama": build_llama,
    "resnet": build_resnet,
    "unet": build_unet,
    "lstm": build_lstm,
    "gru": build_gru,
    **{f"hf-{kind}" if kind == "resnet" else f"hf-{kind}-{attention}": _hf(kind, attention)
       for kind, attentions in HF_MODELS.items() for attention in attentions},
}


# -- coverage report -------------------------------------------------------------------------


def coverage_report(names: list[str]) -> int:
    """Prints, per model, the backward node types its loss reaches and those without a rule in
    some built-in semiring (torch.autograd.semiring.coverage: no backward runs). 0 when every
    node of every model has a rule."""
    from torch.autograd import semiring

    print(f"{'model':<18} {'node types':>10} {'nodes':>6}  without a rule")
    missing_any = False
    for name in names or list(MODELS):
        try:
            built = MODELS[name](torch.float32)
        except ImportError as err:
            print(f"{name:<18} {'-':>10} {'-':>6}  not run: {err}")
            missing_any = True
            continue
        cov = semiring.coverage(built.loss, built.inputs)
        ruleless = sorted(set().union(*cov.missing.values()))
        missing_any = missing_any or bool(ruleless)
        print(f"{name:<18} {len(cov.nodes):>10} {sum(cov.nodes.values()):>6}  {', '.join(ruleless) or '-'}")
    print("every node type has a rule in every built-in semiring" if not missing_any
          else "some node types have no rule (listed above)")
    return 1 if missing_any else 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="coverage of the reference models' backward nodes")
    ap.add_argument("models", nargs="*", help=f"default: all of {', '.join(MODELS)}")
    chosen = ap.parse_args().models
    if set(chosen) - set(MODELS):
        ap.error(f"unknown models {sorted(set(chosen) - set(MODELS))}; known: {', '.join(MODELS)}")
    raise SystemExit(coverage_report(chosen))
