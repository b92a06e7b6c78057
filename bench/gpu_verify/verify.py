#!/usr/bin/env python3
"""envman's GPU verification kit: what envman says about a GPU machine, set against what the machine does.

    python3 bench/gpu_verify/verify.py OUT [--dry-run] [--budget SECONDS]

Steps (each in its own process, each with its own timeout, all inside one time budget; a step that times
out or fails is reported, never lost):
  env        the interpreter, envman, torch/transformers/peft versions; `nvidia-smi -q -x`
  doctor     `envman doctor --dump-facts` and `--json --deep`, field by field against nvidia-smi
  smoke      `envman smoke --host --require-gpu` against the stack envman's matrix gives for the installed torch
  fit        `envman fit --json` for every setup of setups.json
  train      the same setups trained for real (probe_train.py): max_memory_allocated, throughput
  roofline   achieved matmul TFLOP/s and copy bandwidth against matrices/gpu_perf.yaml
Writes OUT/report.json and OUT/summary.txt. Standard library only: it must start where nothing was installed.
`--dry-run` (or a machine without a GPU) gets as far as it can and says what it skipped and why.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PY = os.environ.get("ENVMAN_KIT_PYTHON", sys.executable)
DEFAULT_GPU = "h200"  # the card the kit's fit rows use when no GPU tells it otherwise (the lent machine's)
PEAK_TOLERANCE = 0.10  # issue "fit against real runs": peak within 10%
RATE_TOLERANCE = 0.25  # throughput within 25%


class Kit:
    def __init__(self, out: Path, dry_run: bool, budget: float) -> None:
        self.out, self.dry_run = out, dry_run
        self.deadline = time.monotonic() + budget
        self.report: dict = {"schema": 1, "dry_run": dry_run, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                             "steps": {}, "findings": [], "skipped": []}
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                        PYTHONUNBUFFERED="1", NO_COLOR="1", ENVMAN_NO_UPDATE_CHECK="1")

    # -- plumbing -----------------------------------------------------------------------------------------
    def run(self, argv: list[str], timeout: float) -> dict:
        """A child process, bounded by its own timeout and by what is left of the budget."""
        left = self.deadline - time.monotonic()
        limit = max(1.0, min(timeout, left))
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=limit, env=self.env, cwd=self.out)
            return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-4000:],
                    "seconds": round(time.monotonic() - t0, 2)}
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            return {"rc": None, "timed_out": True, "limit_s": round(limit, 1), "stdout": "", "stderr": err[-4000:],
                    "seconds": round(time.monotonic() - t0, 2)}
        except OSError as e:
            return {"rc": None, "error": str(e), "stdout": "", "stderr": "", "seconds": 0.0}

    def envman(self, *args: str, timeout: float = 60) -> dict:
        return self.run([PY, "-m", "envman", *args], timeout)

    def skip(self, step: str, reason: str) -> None:
        self.report["skipped"].append({"step": step, "reason": reason})

    def finding(self, step: str, text: str) -> None:
        self.report["findings"].append({"step": step, "text": text})

    def python_json(self, code: str, timeout: float = 60) -> dict | None:
        r = self.run([PY, "-c", code], timeout)
        try:
            return json.loads(r["stdout"].strip().splitlines()[-1]) if r["rc"] == 0 else None
        except (IndexError, ValueError):
            return None

    # -- steps --------------------------------------------------------------------------------------------
    def step_env(self) -> dict:
        code = ("import json,platform,importlib.util as u\n"
                "d={'python':platform.python_version()}\n"
                "for m in ('torch','transformers','peft','torchvision','yaml','typer','pynvml'):\n"
                "    d[m]=None\n"
                "    if u.find_spec(m):\n"
                "        try:\n"
                "            mod=__import__(m); d[m]=getattr(mod,'__version__','present')\n"
                "        except Exception as e: d[m]='import failed: '+type(e).__name__\n"
                "try:\n"
                "    import torch; d['torch_cuda']=torch.version.cuda; d['cuda_available']=torch.cuda.is_available()\n"
                "except Exception: pass\n"
                "print(json.dumps(d))")
        info = self.python_json(code) or {}
        v = self.envman("--version", timeout=30)
        info["envman"] = v["stdout"].strip() or v["stderr"].strip()[-200:]
        info["nvidia_smi"] = self.nvidia_smi()
        if info["nvidia_smi"] is None:
            self.skip("env", "nvidia-smi not found or failed: no GPU facts to compare with")
        return info

    def nvidia_smi(self) -> dict | None:
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return None
        r = self.run([exe, "-q", "-x"], 30)
        if r["rc"] != 0:
            return None
        (self.out / "nvidia-smi.xml").write_text(r["stdout"])
        root = ET.fromstring(r["stdout"])
        gpus = []
        for g in root.findall("gpu"):
            def t(path: str, g: ET.Element = g) -> str | None:
                e = g.find(path)
                return None if e is None or e.text is None else e.text.strip()
            gpus.append({"name": t("product_name"), "mem_total": t("fb_memory_usage/total"),
                         "mig": t("mig_mode/current_mig"), "ecc": t("ecc_mode/current_ecc"),
                         "power_limit": t("gpu_power_readings/current_power_limit") or t("power_readings/power_limit"),
                         "pci_device_id": t("pci/pci_device_id"), "uuid": t("uuid")})
        cc = self.run([exe, "--query-gpu=compute_cap", "--format=csv,noheader"], 30)
        caps = cc["stdout"].split() if cc["rc"] == 0 else []
        for g, c in zip(gpus, caps):
            g["cc"] = c
        drv = root.find("driver_version")
        cuda = root.find("cuda_version")
        return {"driver": None if drv is None else drv.text, "cuda": None if cuda is None else cuda.text, "gpus": gpus}

    def step_doctor(self, smi: dict | None) -> dict:
        facts_path = self.out / "facts.json"
        r = self.envman("doctor", "--dump-facts", str(facts_path), timeout=60)
        out: dict = {"dump_rc": r["rc"], "seconds": r["seconds"]}
        if r["rc"] != 0 or not facts_path.is_file():
            self.finding("doctor", f"envman doctor --dump-facts failed (rc {r['rc']}): {r['stderr'][-300:]}")
            return out
        facts = json.loads(facts_path.read_text())
        j = self.envman("doctor", "--json", "--deep", timeout=90)
        try:
            rep = json.loads(j["stdout"])
            out["verdict"], out["findings"] = rep.get("verdict"), [f"{f.get('severity')}:{f.get('check')}" for f in rep.get("findings", [])]
        except ValueError:
            self.finding("doctor", f"envman doctor --json printed no JSON (rc {j['rc']}): {j['stderr'][-300:]}")
        out["facts"] = {k: facts.get(k) for k in ("driver", "driver_cuda", "driver_source", "gpus", "libcuda")}
        if smi is None:
            self.skip("doctor-vs-nvidia-smi", "no nvidia-smi")
            return out
        out["compare"] = self.compare_gpu_facts(facts, smi)
        return out

    def compare_gpu_facts(self, facts: dict, smi: dict) -> list[dict]:
        rows = [("driver", facts.get("driver"), smi.get("driver"))]
        gpus = facts.get("gpus") or []
        if len(gpus) != len(smi["gpus"]):
            rows.append(("gpu count", len(gpus), len(smi["gpus"])))
        for f, s in zip(gpus, smi["gpus"]):
            mem = re.match(r"(\d+)", s.get("mem_total") or "")
            rows += [("name", f.get("name"), s.get("name")), ("cc", f.get("cc"), s.get("cc")),
                     ("memory MiB", f.get("mem_total_mib"), int(mem.group(1)) if mem else None),
                     ("MIG", f.get("mig"), None if s.get("mig") in (None, "N/A") else s.get("mig") == "Enabled"),
                     ("power limit W", f.get("power_limit_w"), _watts(s.get("power_limit")))]
        out = []
        for what, envman_says, smi_says in rows:
            same = _same(envman_says, smi_says)
            out.append({"field": what, "envman": envman_says, "nvidia_smi": smi_says, "agree": same})
            if same is False:
                self.finding("doctor", f"{what}: envman says {envman_says!r}, nvidia-smi says {smi_says!r}")
        return out

    def gpu_id(self, env: dict) -> str:
        """The gpus.yaml id of this machine's first GPU, as envman resolves its compute capability and name."""
        smi = env.get("nvidia_smi") or {}
        gpus = smi.get("gpus") or []
        if not gpus:
            return DEFAULT_GPU
        name = gpus[0].get("name") or ""
        probe = self.envman("fit", "--params", "1e6", "--target", name, "--json", timeout=30)
        try:
            return json.loads(probe["stdout"])["targets"][0]["id"]
        except (ValueError, KeyError, IndexError):
            self.finding("env", f"envman does not know this GPU by its NVML name {name!r} "
                                f"(fit: {probe['stderr'].strip()[-200:]}); using {DEFAULT_GPU}")
            return DEFAULT_GPU

    def step_smoke(self, env: dict, gpu: str) -> dict:
        torch_v = env.get("torch")
        if not torch_v or torch_v.startswith("import failed"):
            self.skip("smoke", f"torch is not importable here ({torch_v})")
            return {}
        public = torch_v.split("+")[0]
        args = ["resolve", "--framework", f"torch=={public}", "--target", gpu, "--python", env["python"].rsplit(".", 1)[0],
                "--json"]
        if env.get("torch_cuda"):
            args += ["--cuda", env["torch_cuda"]]
        else:
            args = ["resolve", "--framework", f"torch=={public}", "--cpu", "--python", env["python"].rsplit(".", 1)[0], "--json"]
        r = self.envman(*args, timeout=30)
        try:
            res = json.loads(r["stdout"])
        except ValueError:
            self.finding("smoke", f"envman's matrix has no stack for the installed torch {torch_v}: "
                                  f"{(r['stderr'] or r['stdout']).strip()[-300:]}")
            return {"resolve_rc": r["rc"]}
        stack = {"schema": 1, "framework": res["framework"], "cuda": res["cuda"] if res["framework"]["variant"] != "cpu" else None,
                 "cudnn": res.get("cudnn"), "nccl": res.get("nccl"), "python": res["python"],
                 "arch_list": res.get("arch_list") or [], "imports": [], "lock_hash": "gpu-verify"}
        (self.out / "stack.json").write_text(json.dumps(stack, indent=2))
        flags = ["--host", "--expect", str(self.out / "stack.json"), "--json"]
        if not self.dry_run:
            flags.append("--require-gpu")
        s = self.envman("smoke", *flags, timeout=120)
        out = {"expected": stack, "rc": s["rc"], "seconds": s["seconds"]}
        try:
            rep = json.loads(s["stdout"])
            out["checks"] = rep.get("checks", rep)
            for c in rep.get("checks", []):
                if c.get("status") == "fail" or c.get("ok") is False:
                    self.finding("smoke", f"{c.get('name', c.get('id'))}: {c.get('detail') or c.get('message')}")
        except ValueError:
            self.finding("smoke", f"envman smoke printed no JSON (rc {s['rc']}): {s['stderr'][-300:]}")
        if s["rc"] == 6:
            self.skip("smoke-gpu", "the smoke test saw no GPU (exit 6): its GPU checks did not run")
        return out

    def step_fit(self, setups: list[dict], gpu: str) -> dict:
        rows = {}
        for s in setups:
            model = s["model"]
            if s.get("config"):  # the setup's config keys on top of the published config, as the user's config.json
                path = self.out / f"{s['id']}.config.json"
                path.write_text(json.dumps(dict(load_models()[model]["config"], **s["config"])))
                model = str(path)
            r = self.envman("fit", "--model", model, "--target", gpu, "--json", *s["fit"], timeout=30)
            try:
                j = json.loads(r["stdout"])
                t = j["targets"][0]
                rows[s["id"]] = {"peak_bytes": j["peak_bytes"], "fits": t["fits"],
                                 "throughput": t.get("tokens_per_second") or t.get("samples_per_second")
                                 or (j.get("estimate") or {}).get("samples_per_second"),
                                 "attention": j["setup"].get("attention"), "rc": r["rc"]}
            except (ValueError, KeyError, IndexError):
                rows[s["id"]] = {"error": (r["stderr"] or r["stdout"]).strip()[-300:], "rc": r["rc"]}
                self.finding("fit", f"{s['id']}: envman fit gave no estimate (rc {r['rc']}): {rows[s['id']]['error']}")
        return rows

    def step_train(self, setups: list[dict], models: dict, env: dict, dry: dict) -> dict:
        missing = [m for m in ("torch", "transformers") if not env.get(m) or str(env[m]).startswith("import failed")]
        if missing:
            self.skip("train", f"not importable here: {', '.join(missing)}")
            return {}
        if not self.dry_run and not env.get("cuda_available"):
            self.skip("train", "torch sees no GPU")
            return {}
        rows = {}
        for s in setups:
            need = ["peft"] if s["probe"].get("lora_rank") else ["torchvision"] if s["model"] == "resnet-50" else []
            absent = [m for m in need if not env.get(m) or str(env[m]).startswith("import failed")]
            if absent:
                self.skip(f"train:{s['id']}", f"not importable here: {', '.join(absent)}")
                continue
            argv = [PY, str(HERE / "probe_train.py"), json.dumps(dict(s, dry=dry)), json.dumps(models[s["model"]])]
            r = self.run(argv + (["--dry-run"] if self.dry_run else []), timeout=90 if not self.dry_run else 120)
            try:
                rows[s["id"]] = json.loads(r["stdout"].strip().splitlines()[-1])
            except (IndexError, ValueError):
                why = "timed out" if r.get("timed_out") else f"rc {r['rc']}"
                rows[s["id"]] = {"status": "failed", "why": why, "stderr": r["stderr"][-1500:]}
                self.finding("train", f"{s['id']}: the training probe failed ({why}): {r['stderr'].strip()[-200:]}")
        return rows

    def step_roofline(self, env: dict, gpu: str) -> dict:
        if not env.get("torch") or str(env["torch"]).startswith("import failed"):
            self.skip("roofline", "torch is not importable here")
            return {}
        if not self.dry_run and not env.get("cuda_available"):
            self.skip("roofline", "torch sees no GPU")
            return {}
        r = self.run([PY, str(HERE / "probe_roofline.py")] + (["--dry-run"] if self.dry_run else []), timeout=90)
        try:
            got = json.loads(r["stdout"].strip().splitlines()[-1])
        except (IndexError, ValueError):
            self.finding("roofline", f"the roofline probe failed (rc {r['rc']}): {r['stderr'].strip()[-200:]}")
            return {"rc": r["rc"]}
        got["gpu_perf"] = gpu_perf(gpu)
        return got

    # -- the comparison -----------------------------------------------------------------------------------
    def compare_fit(self, fit: dict, train: dict) -> list[dict]:
        rows = []
        for sid, t in train.items():
            f = fit.get(sid) or {}
            if t.get("status") != "ok" or "peak_bytes" not in f or self.dry_run:
                continue
            peak_err = (f["peak_bytes"] - t["peak_bytes"]) / t["peak_bytes"] if t.get("peak_bytes") else None
            rate_err = (f["throughput"] - t["throughput"]) / t["throughput"] if f.get("throughput") and t.get("throughput") else None
            row = {"setup": sid, "measured_peak_bytes": t["peak_bytes"], "fit_peak_bytes": f["peak_bytes"],
                   "peak_error": _round(peak_err), "measured_throughput": t["throughput"],
                   "fit_throughput": f.get("throughput"), "throughput_error": _round(rate_err), "unit": t["unit"],
                   # what the caching allocator held beyond the allocated peak (docs/fit-allocator.md's question)
                   "measured_reserved_bytes": t.get("reserved_peak_bytes"),
                   "reserve_ratio": _round(t["reserved_peak_bytes"] / t["peak_bytes"])
                   if t.get("reserved_peak_bytes") and t.get("peak_bytes") else None}
            rows.append(row)
            if peak_err is not None and abs(peak_err) > PEAK_TOLERANCE:
                self.finding("fit", f"{sid}: fit's peak is {peak_err:+.0%} off the allocator's ({_gb(f['peak_bytes'])} vs {_gb(t['peak_bytes'])})")
            if rate_err is not None and abs(rate_err) > RATE_TOLERANCE:
                self.finding("fit", f"{sid}: fit's throughput is {rate_err:+.0%} off the measured {t['throughput']:,.0f} {t['unit']}/s")
        return rows

    def compare_roofline(self, roof: dict) -> None:
        perf = roof.get("gpu_perf") or {}
        if self.dry_run or not roof.get("tflops") or not perf:
            return
        for prec, got in roof["tflops"].items():
            peak = (perf.get("tflops") or {}).get(prec)
            if peak:
                frac = got / peak
                roof.setdefault("fraction_of_datasheet", {})[prec] = round(frac, 3)
                if frac > 1.05:
                    self.finding("roofline", f"{prec}: measured {got} TFLOP/s is above gpu_perf's dense peak {peak}: the figure is too low")
                elif frac < 0.5:
                    self.finding("roofline", f"{prec}: measured {got} TFLOP/s is under half of gpu_perf's {peak}")
        bw = perf.get("bandwidth_gb_s") or perf.get("memory_bandwidth_gb_s")
        if bw and roof.get("bandwidth_gb_s"):
            roof.setdefault("fraction_of_datasheet", {})["bandwidth"] = round(roof["bandwidth_gb_s"] / bw, 3)
        elif not bw:
            self.finding("roofline", "matrices/gpu_perf.yaml has no memory bandwidth for this GPU")

    def main(self) -> int:
        cfg = json.loads((HERE / "setups.json").read_text())
        setups, models = cfg["setups"], load_models()
        steps = self.report["steps"]
        t0 = time.monotonic()
        steps["env"] = env = self.step_env()
        if self.dry_run:
            self.skip("gpu", "--dry-run: the GPU steps run on the CPU at toy sizes (their figures are not compared)")
        steps["doctor"] = self.step_doctor(env.get("nvidia_smi"))
        gpu = self.gpu_id(env)
        steps["gpu_id"] = gpu
        steps["smoke"] = self.step_smoke(env, gpu)
        steps["fit"] = self.step_fit(setups, gpu)
        steps["train"] = self.step_train(setups, models, env, cfg["dry"])
        steps["roofline"] = self.step_roofline(env, gpu)
        steps["fit_vs_measured"] = self.compare_fit(steps["fit"], steps["train"])
        self.compare_roofline(steps["roofline"])
        self.report["seconds"] = round(time.monotonic() - t0, 1)
        self.report["out_of_time"] = time.monotonic() > self.deadline
        (self.out / "report.json").write_text(json.dumps(self.report, indent=2, default=str))
        (self.out / "summary.txt").write_text(summary(self.report))
        print(summary(self.report))
        return 0


def load_models() -> dict:
    import yaml  # envman's own dependency: where envman runs, it is there

    data = yaml.safe_load((ROOT / "matrices" / "models.yaml").read_text())
    return {m["id"]: m for m in data["models"]}


def gpu_perf(gpu: str) -> dict:
    import yaml

    data = yaml.safe_load((ROOT / "matrices" / "gpu_perf.yaml").read_text())
    return (data.get("gpus") or {}).get(gpu) or {}


def summary(rep: dict) -> str:
    s = rep["steps"]
    env = s.get("env", {})
    smi = env.get("nvidia_smi") or {}
    gpu = (smi.get("gpus") or [{}])[0]
    lines = [f"envman GPU verification kit — {rep['started']}{' (dry run)' if rep['dry_run'] else ''}",
             f"envman {env.get('envman')}; python {env.get('python')}; torch {env.get('torch')}; "
             f"GPU {gpu.get('name', 'none')} (driver {smi.get('driver', '-')}); {rep.get('seconds')} s"]
    doc = s.get("doctor", {})
    if doc.get("verdict"):
        lines.append(f"doctor: {doc['verdict']}; findings: {', '.join(doc.get('findings') or []) or 'none'}")
    for row in s.get("fit_vs_measured", []):
        lines.append(f"  {row['setup']:<26} peak {_gb(row['measured_peak_bytes'])} measured, fit {_gb(row['fit_peak_bytes'])} "
                     f"({_pct(row['peak_error'])}); {row['measured_throughput']:,.0f} {row['unit']}/s, "
                     f"fit {_pct(row['throughput_error'])}")
    roof = s.get("roofline", {})
    if roof.get("tflops") and not rep["dry_run"]:
        lines.append("roofline: " + ", ".join(f"{k} {v} TFLOP/s" for k, v in roof["tflops"].items())
                     + f"; copy {roof.get('bandwidth_gb_s')} GB/s")
    lines.append(f"findings ({len(rep['findings'])}):")
    lines += [f"  - [{f['step']}] {f['text']}" for f in rep["findings"]] or ["  none"]
    lines.append(f"skipped ({len(rep['skipped'])}):")
    lines += [f"  - [{k['step']}] {k['reason']}" for k in rep["skipped"]] or ["  none"]
    return "\n".join(lines) + "\n"


def _same(a, b) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= max(1.0, 0.01 * abs(b))
    return str(a).strip().lower() == str(b).strip().lower()


def _watts(text: str | None) -> float | None:
    m = re.match(r"([\d.]+)", text or "")
    return float(m.group(1)) if m else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _gb(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--budget", type=float, default=330.0, help="seconds for everything (default 330)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    sys.exit(Kit(a.out.resolve(), a.dry_run, a.budget).main())
