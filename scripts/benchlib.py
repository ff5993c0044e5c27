"""benchlib.py - what the `make bench` scripts (scripts/bench*.py) share: the
section of docs/performance.md each one writes, how a measured figure is
printed, the environment of a measured child and the PyTorch venv's python.
Imported by scripts run as `scripts/bench_x.py` (their folder is on sys.path)."""
import os
import re
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def write_section(path, heading, text):
    """--write: replace the section of the markdown file `path` whose heading
    line begins with `heading` (e.g. "## Multi-rank merge"; it runs to the
    next "## " heading or the end) by `text`, put at the end of the file, so
    that the figures of one script never pile up.  A file that does not exist
    is created holding `text` alone."""
    old = open(path).read() if os.path.exists(path) else ""
    old = re.sub(r"\n" + re.escape(heading) + r".*?(?=\n## |\Z)", "", old,
                 flags=re.S).rstrip("\n")
    with open(path, "w") as f:
        f.write((old + "\n\n" if old else "") + text)
    print(f"wrote {path}")


def spread(xs, fmt=".2f", unit="", scale=1):
    """"median [min-max]" of the figures xs, each times `scale`, the unit after
    the median: spread([1, 2, 4], ".1f", " s") is "2.0 s [1.0-4.0]"."""
    return (f"{statistics.median(xs) * scale:{fmt}}{unit} "
            f"[{min(xs) * scale:{fmt}}-{max(xs) * scale:{fmt}}]")


def difference(lo, mid, hi, unit="", fmt=".0f"):
    """A difference (traced minus bare) given as its least, middle and greatest
    figure: "mid unit [lo-hi]", or "not measurable" when its spread crosses
    zero - on a shared machine such a figure says nothing about the sign."""
    if lo <= 0 <= hi:
        return f"not measurable (spread {lo:{fmt}}-{hi:{fmt}}{unit} crosses zero)"
    return f"{mid:{fmt}}{unit} [{lo:{fmt}}-{hi:{fmt}}]"


def clean_env():
    """This process's environment without what would change a measured PyTorch
    child: our settings (CUMEMTRACE_*), the simulated device's (SIMCUDA_*),
    the loader's (LD_*: a preload the caller did not ask for) and PyTorch's
    allocator settings (PYTORCH_*).  A new dict; the caller adds its own."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_"))}


def torch_python(create=False):
    """The python of the PyTorch venv (scripts/torch-env.sh), or None where
    there is none usable.  create=True makes it first when it is missing
    (several GB from PyPI, once); otherwise only asks (torch-env.sh --check)."""
    p = subprocess.run([os.path.join(HERE, "torch-env.sh")] + ([] if create else ["--check"]),
                       capture_output=True, text=True)
    lines = p.stdout.strip().splitlines()
    return lines[-1] if p.returncode == 0 and lines else None
