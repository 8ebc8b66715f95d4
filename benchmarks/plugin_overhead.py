"""Cost of the graphstitch pytest plugin on tests that do not use it.

Runs the same generated suite (N trivial tests) with the plugin loaded and with it blocked,
side by side, alternating, and prints the best CPU time of each and their ratio. Also reports
whether loading the plugin imported torch.

    python benchmarks/plugin_overhead.py [N] [ROUNDS]
"""

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


def run(tmp: Path, plugin: bool) -> float:
    args = ["-p", "graphstitch.plugin"] if plugin else ["-p", "no:graphstitch", "-p", "no:graphstitch.plugin"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args, str(tmp)]
    # CPU time of the child (user + sys): wall time on a shared machine is mostly noise.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"pytest failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        body = "\n".join(f"def test_{i}():\n    assert {i} + 1 == {i + 1}\n" for i in range(N))
        (tmp / "test_many.py").write_text(body + "\n\ndef test_no_torch():\n    import sys\n"
                                          "    assert 'torch' not in sys.modules\n")
        (tmp / "pytest.ini").write_text("[pytest]\n")
        with_p, without = [], []
        for i in range(ROUNDS):
            for plugin in ((False, True) if i % 2 else (True, False)):   # alternate who goes first
                (with_p if plugin else without).append(run(tmp, plugin))
        a, b = min(with_p), min(without)
        print(f"{N + 1} tests not using graphstitch, best of {ROUNDS} runs (CPU s of the whole pytest process):")
        print(f"  plugin blocked: {b:.3f} s   plugin loaded: {a:.3f} s   ratio {a / b:.3f} "
              f"({(a - b) / (N + 1) * 1e6:+.1f} us per test); torch not imported: yes (test_no_torch passed)")


if __name__ == "__main__":
    main()
