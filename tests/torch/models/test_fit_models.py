"""`cumemtrace fit` on a real PyTorch training script: its figures are
PyTorch's own (the same script run bare on the same simulated card prints
them from memory_stats()), and its verdict is what the caching allocator
did (an OutOfMemoryError in the bare run, or none)."""
import os
import re
import subprocess
import sys

from conftest import BUILD, CLI, SCENARIOS, SIMGPU, TIMEOUT, line_of
import json


def env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CUMEMTRACE_", "SIMCUDA_", "LD_", "PYTORCH_"))}


def bare(card, *args):
    opt = ["--gpu", card] if not card[0].isdigit() else ["--memory", card]
    p = subprocess.run([str(SIMGPU), "--build", str(BUILD), *opt, "--", sys.executable,
                        str(SCENARIOS / "model_mlp.py"), *args], env=env(),
                       capture_output=True, text=True, timeout=TIMEOUT)
    line = [l for l in p.stdout.splitlines() if l.startswith("TORCH ")]
    return p, json.loads(line[-1][6:]) if line else None


def fit(tmp_path, cards, *args):
    opts = []
    for c in cards:
        opts += ["--memory", c] if c[0].isdigit() else ["--gpu", c]
    # --no-fixes: what the allocator settings do is the fragmented test's
    p = subprocess.run([str(CLI), "fit", "--bytes", "--no-fixes", "--output", str(tmp_path),
                        *opts, "--", sys.executable, str(SCENARIOS / "model_mlp.py"), *args],
                       env=env(),
                       capture_output=True, text=True, timeout=3 * TIMEOUT)
    table = {}
    for l in p.stdout.splitlines()[1:]:  # a card's row, its indented lines after a tab
        if not l:
            break  # the fixes tried, below the table
        if l.startswith(" "):
            table[last] += "\t" + l.strip()
        else:
            last = l.split()[0]
            table[last] = l
    return p, table


def test_fit_figures_are_pytorchs_and_the_verdicts_the_allocators(tmp_path):
    # batch 32768: two 512 MiB hidden activations kept for backward; a
    # 1.5 GiB card (`simgpu --memory`: no context reserve) cannot hold them
    p, table = fit(tmp_path, ["l4", "1536MiB"], "2", "32768")
    assert p.returncode == 1, p.stderr  # it ran out of memory on one card
    ok, t = bare("l4", "2", "32768")
    assert ok.returncode == 0 and t is not None, ok.stderr
    f = table["l4"].split()
    assert f[2] == "fits", table["l4"]
    assert [int(f[3]), int(f[4])] == [t["max_allocated"], t["max_reserved"]]
    assert int(f[5]) == 22726 * (1 << 20) - 500 * (1 << 20) - t["max_reserved"]

    small, _ = bare("1536MiB", "2", "32768")
    assert small.returncode != 0 and "torch.OutOfMemoryError" in small.stderr, small.stderr
    row = table["1536MiB"]
    m = re.search(r"\tOOM at (\S+):(\d+) \(<module>\) after \d+\.\d s\t", row)
    assert m, row
    assert m.group(1).endswith("model_mlp.py")
    # the line of the script that raised it: the forward, the backward or the step
    assert int(m.group(2)) in range(line_of("model_mlp.py", "FORWARD"),
                                    line_of("model_mlp.py", "FORWARD") + 4), row
    assert os.path.exists(row.split("\tpost-mortem: ")[1]), row


GPT2 = """import sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer=2, n_head=4, n_embd=256, vocab_size=8000, n_positions=1024)
model = GPT2LMHeadModel(cfg).cuda()
x = torch.zeros(int(sys.argv[1]), 1024, dtype=torch.long, device="cuda")
out = model(x)  # FORWARD
"""


def test_the_oom_line_is_the_users_not_an_installed_packages(tmp_path):
    # the OOM is raised inside transformers (site-packages): the line named
    # is the script's own, relative to where fit ran, and the rows stay narrow
    # (the fixes' lines below them: the fragmented test's)
    (tmp_path / "gpt2.py").write_text(GPT2)
    p = subprocess.run([str(CLI), "fit", "--no-fixes", "--output", "out", "--memory", "512MiB",
                        "--", sys.executable, "gpt2.py", "16"], env=env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=3 * TIMEOUT)
    assert p.returncode == 1, p.stdout + p.stderr
    log = (tmp_path / "out" / "512MiB" / "output.log").read_text()
    assert "site-packages/transformers/" in log, log  # where it was raised
    lines = p.stdout.splitlines()
    assert lines[2].strip().startswith("OOM at gpt2.py:7 (<module>) after "), p.stdout
    assert all(len(l) <= 90 for l in lines), p.stdout


RESET = """import torch
big = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")  # LOAD
del big
torch.cuda.empty_cache()
torch.cuda.reset_peak_memory_stats()
small = torch.empty(40 << 20, dtype=torch.uint8, device="cuda")
print("AFTER", torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
"""


def test_a_reset_of_pytorchs_peak_does_not_hide_the_peak(tmp_path):
    (tmp_path / "reset.py").write_text(RESET)
    p = subprocess.run([str(CLI), "fit", "--bytes", "--no-fixes", "--output", "out", "--memory",
                        "2GiB", "--memory", "8GiB", "--", sys.executable, "reset.py"], env=env(),
                       cwd=tmp_path, capture_output=True, text=True, timeout=3 * TIMEOUT)
    assert p.returncode == 1, p.stdout + p.stderr  # 3 GiB do not fit in 2 GiB
    lines = p.stdout.splitlines()
    big = [l for l in lines if l.startswith("8GiB ")][0].split()
    assert big[2] == "fits" and int(big[3]) >= 3 << 30 and int(big[4]) >= 3 << 30, p.stdout
    assert int(big[5]) == (8 << 30) - int(big[4]), p.stdout
    assert any("the script reset PyTorch's peaks 1 time: these are the whole run's" in l
               for l in lines), p.stdout
    import torch
    assert lines[-1] == f"figures of PyTorch {torch.__version__} on the simulated card"
    # compute capability 9.0 (simgpu --memory): cuDNN attention could be picked
    assert lines[-3].startswith("not modelled: cuDNN attention's workspace"), p.stdout
    # the script sees what it sees without fit: its own reset took effect
    bare = subprocess.run([str(SIMGPU), "--build", str(BUILD), "--memory", "8GiB", "--",
                           sys.executable, "reset.py"], env=env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    after = [l for l in bare.stdout.splitlines() if l.startswith("AFTER")]
    assert after == [l for l in (tmp_path / "out" / "8GiB" / "output.log").read_text()
                     .splitlines() if l.startswith("AFTER")], bare.stdout
    assert int(after[0].split()[1]) == 40 << 20


GENERATE = """import torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=256)
model = GPT2LMHeadModel(cfg).cuda().eval()
ids = torch.ones(1, 8, dtype=torch.long, device="cuda")
out = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
print("GENERATED", out.shape[1])
"""


def test_generate_ends_after_its_new_tokens_under_fit(tmp_path):
    # generate()'s stopping test reads a flag only kernels compute: on the
    # simulated card it read 0 and decoding went on until the timeout
    # ('undecided'); under fit it stops at max_length, as a card does when
    # no EOS comes earlier
    (tmp_path / "gen.py").write_text(GENERATE)
    p = subprocess.run([str(CLI), "fit", "--bytes", "--output", "out", "--gpu", "l4",
                        "--timeout", "120",
                        "--", sys.executable, "gen.py"], env=env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=3 * TIMEOUT)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[1].split()[2] == "fits", p.stdout
    assert "stopped after" not in p.stdout and "undecided" not in p.stdout, p.stdout
    log = (tmp_path / "out" / "l4" / "output.log").read_text()
    assert "GENERATED 13" in log.splitlines(), log  # 8 prompt + 5 new tokens


PATCHED = """import sys
import transformers.generation.utils as u
print("STOPCHECK", u.StopCheck.__call__.__module__, u.StopCheck.__call__.__qualname__)
print("CRITERIA", u.StoppingCriteriaList.__call__.__module__)
print("META", [type(f).__name__ for f in sys.meta_path])
"""


def test_generate_is_left_alone_in_a_traced_run(tmp_path):
    # the stopping test is fit's alone: `cumemtrace run` leaves transformers
    # and the import machinery as a bare run has them
    (tmp_path / "patched.py").write_text(PATCHED)
    out = []
    for traced in (False, True):
        cmd = [str(SIMGPU), "--build", str(BUILD), "--gpu", "l4", "--"]
        if traced:
            cmd += [str(CLI), "run", "--output", "out/", "--"]
        cmd += [sys.executable, "-c", "import torch; torch.zeros(1, device='cuda')\n"
                + PATCHED]
        p = subprocess.run(cmd, env=env(), cwd=tmp_path, capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr
        out.append([l for l in p.stdout.splitlines() if l.startswith(("STOPCHECK", "CRITERIA",
                                                                      "META"))])
    assert out[0] == out[1] and len(out[0]) == 3, out
    assert "StopCheck.__call__" in out[0][0], out


FRAGMENTED = """import torch
MiB = 1 << 20
a = torch.empty(500 * MiB, dtype=torch.uint8, device="cuda")
b = torch.empty(500 * MiB, dtype=torch.uint8, device="cuda")
del a, b  # two cached 500 MiB segments
x = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")  # each splits one:
y = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")  # 200 MiB free in each
z = torch.empty(350 * MiB, dtype=torch.uint8, device="cuda")  # FRAGMENTED
print("DONE")
"""


def test_the_allocator_setting_that_fixes_it_is_verified_and_the_advice_says_so(tmp_path):
    (tmp_path / "frag.py").write_text(FRAGMENTED)
    p = subprocess.run([str(CLI), "fit", "--bytes", "--output", "out", "--memory", "1GiB",
                        "--", sys.executable, "frag.py"], env=env(), cwd=tmp_path,
                       capture_output=True, text=True, timeout=6 * TIMEOUT)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "OOM at frag.py:8 (<module>)" in p.stdout, p.stdout
    assert all(len(l) <= 90 for l in p.stdout.splitlines()), p.stdout  # the fixes' lines too
    tried = {l.split()[0]: l.split()[1:] for l in p.stdout.split("\n\n")[1].splitlines()[2:]}
    assert tried["expandable_segments:True"][0] == "fits", p.stdout
    # its figures are the bare run's with the same setting
    bare = subprocess.run([str(SIMGPU), "--build", str(BUILD), "--memory", "1GiB", "--",
                           sys.executable, "-c", FRAGMENTED.replace(
                               'print("DONE")', 'print("PEAKS", torch.cuda.max_memory_allocated(),'
                               ' torch.cuda.max_memory_reserved())')],
                          env={**env(), "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                          capture_output=True, text=True, timeout=TIMEOUT)
    peaks = [l.split()[1:] for l in bare.stdout.splitlines() if l.startswith("PEAKS")]
    assert peaks == [tried["expandable_segments:True"][1:3]], (bare.stdout, bare.stderr)
    # the post-mortem's advice: what was verified says so, and only that
    pm = [l.split("post-mortem: ")[1] for l in p.stdout.splitlines() if "post-mortem: " in l]
    r = subprocess.run([str(CLI), "report", pm[0]], cwd=tmp_path, capture_output=True,
                       text=True, timeout=TIMEOUT, env=env())
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "Verified on the simulated card (cumemtrace fit): with " \
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the run fits" in text or \
           "Verified on the simulated card (cumemtrace fit): set " \
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and the same script fits" in text, \
        r.stdout
    for setting, (verdict, *_) in tried.items():
        if verdict != "fits":
            assert f"PYTORCH_CUDA_ALLOC_CONF={setting} the run fits" not in text
            assert f"PYTORCH_CUDA_ALLOC_CONF={setting} and the same script fits" not in text


MOE = """import torch
torch.manual_seed(0)
E, D = 4, 64
experts = torch.nn.ModuleList(torch.nn.Linear(D, D) for _ in range(E)).cuda()
router = torch.nn.Linear(D, E).cuda()
x = torch.randn(32, D, device="cuda", requires_grad=True)
w, idx = router(x).softmax(-1).topk(1, dim=-1)
out = torch.zeros_like(x)
for e in range(E):  # the experts chosen by value: none, when routing reads zeros
    rows = (idx[:, 0] == e).nonzero()[:, 0]
    if rows.numel() == 0:
        continue
    out = out.index_add(0, rows, experts[e](x[rows]) * w[rows])
out.sum().backward()
"""


def test_routing_by_value_that_fails_here_is_undecided_not_failed(tmp_path):
    (tmp_path / "moe.py").write_text(MOE)
    p = subprocess.run([str(CLI), "fit", "--output", "out", "--gpu", "l4", "--", sys.executable,
                        "moe.py"], env=env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=3 * TIMEOUT)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert "undecided" in lines[1].split(), p.stdout
    assert lines[2].strip().startswith("failed after ") and \
        "its control flow reads values the simulated card never computes" in lines[2], p.stdout
