/* Callgrind client requests for benchmarks/real_path.py --instructions.
 *
 * Python cannot issue a client request itself, so the measured region is opened and closed
 * through these two functions (loaded with ctypes). Under callgrind with --instr-atstart=no,
 * interpreter start-up and `import torch` run uninstrumented (fast, and not counted); every
 * measure_stop() writes one dump holding exactly the instructions of the region. Outside
 * valgrind the requests are no-ops.
 */
#include <valgrind/callgrind.h>

void measure_start(void) {
  CALLGRIND_START_INSTRUMENTATION;
  CALLGRIND_ZERO_STATS;
}

void measure_stop(const char* name) {
  CALLGRIND_DUMP_STATS_AT(name);
  CALLGRIND_STOP_INSTRUMENTATION;
}
