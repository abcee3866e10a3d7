"""SLURM's client commands, answered on this machine: a stand-in cluster for the tests.

`sbatch` records its options, gives the job an id and runs the job script locally in the
background (output to `--output`, `%j` replaced); `squeue` and `sacct` report job states in the
formats the Snakemake SLURM executor parses; `scancel` stops a job; `sinfo`, `sacctmgr`,
`sshare` describe a cluster with partitions `cpu` (default) and `gpu` and one account; `srun`
runs its command in place. State lives in $SLURM_SHIM_STATE: `submissions.jsonl` (one record per
sbatch call) and `jobs/<id>.json`. A job whose `--comment` equals $SLURM_SHIM_FAIL_ONCE fails
without running the first time it is submitted (a node lost under it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

STATE = Path(os.environ.get("SLURM_SHIM_STATE", "slurm_shim_state"))
JOBS = STATE / "jobs"
ACCOUNT = os.environ.get("SLURM_SHIM_ACCOUNT", "lab")
FLAGS = {"--parsable", "--requeue", "--no-requeue", "-X", "--parsable2", "--noheader", "-n"}


def _options(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """`--key=value`, `--key value` and `-k value` options, and the positional arguments."""
    options, positional, i = {}, [], 0
    while i < len(args):
        arg = args[i]
        if arg in FLAGS:
            options[arg] = ""
        elif arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            options[key] = value
        elif arg.startswith("-") and i + 1 < len(args):
            options[arg] = args[i + 1]
            i += 1
        else:
            positional.append(arg)
        i += 1
    return options, positional


def _locked_next_id() -> int:
    JOBS.mkdir(parents=True, exist_ok=True)
    with open(STATE / "counter", "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        job_id = int(counter.read() or 1000) + 1
        counter.seek(0)
        counter.truncate()
        counter.write(str(job_id))
    return job_id


def _write_job(job_id: int | str, **fields) -> None:
    path = JOBS / f"{job_id}.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    record.update(fields)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record))
    temporary.replace(path)


def _jobs() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(JOBS.glob("*.json"))] if JOBS.exists() else []


def sbatch(args: list[str]) -> int:
    options, positional = _options(args)
    if "--wrap" in options:
        script = "#!/bin/sh\n" + options["--wrap"] + "\n"
    elif positional:
        script = (
            sys.stdin.read() if positional[0] == "/dev/stdin" else Path(positional[0]).read_text()
        )
    else:
        print("sbatch: error: no job script and no --wrap", file=sys.stderr)
        return 1
    job_id = _locked_next_id()
    name = options.get("--job-name", options.get("-J", "sbatch"))
    comment = options.get("--comment", "")
    output = options.get("--output", options.get("-o", f"slurm-{job_id}.out"))
    output = output.replace("%j", str(job_id))
    with open(STATE / "submissions.jsonl", "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps({"id": job_id, "options": options, "argv": args}) + "\n")
    (JOBS / f"{job_id}.sh").write_text(script)
    failed_before = STATE / f"failed-once-{comment}"
    if comment and comment == os.environ.get("SLURM_SHIM_FAIL_ONCE") and not failed_before.exists():
        failed_before.touch()
        _write_job(job_id, id=job_id, name=name, comment=comment, state="NODE_FAIL", output=output)
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text("slurmstepd: error: node lost (simulated)\n")
    else:
        _write_job(job_id, id=job_id, name=name, comment=comment, state="PENDING", output=output)
        subprocess.Popen(
            [sys.executable, __file__, "_run", str(job_id)],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    print(job_id if "--parsable" in options else f"Submitted batch job {job_id}")
    return 0


def _run(job_id: str) -> int:
    """The background runner of one job: its script, then its final state."""
    record = json.loads((JOBS / f"{job_id}.json").read_text())
    _write_job(job_id, state="RUNNING", pid=os.getpid())
    env = {**os.environ, "SLURM_JOB_ID": job_id, "SLURM_JOBID": job_id}
    env["SLURM_JOB_NAME"] = record["name"]
    Path(record["output"]).parent.mkdir(parents=True, exist_ok=True)
    with open(record["output"], "w") as output:
        done = subprocess.run(
            ["sh", str(JOBS / f"{job_id}.sh")], stdout=output, stderr=subprocess.STDOUT, env=env
        )
    state = json.loads((JOBS / f"{job_id}.json").read_text())["state"]
    if state != "CANCELLED":
        _write_job(job_id, state="COMPLETED" if done.returncode == 0 else "FAILED")
    return 0


def _states(args: list[str]) -> int:
    """squeue --format=%i|%T --name RUN and sacct -X --parsable2 --format=JobIdRaw,State --name
    RUN: one `id|STATE` line per job of the run; other queries (an account, a step's reason)
    answer nothing."""
    options, _ = _options(args)
    name = options.get("--name")
    if name is None:
        return 0
    for job in _jobs():
        if job["name"] == name:
            print(f"{job['id']}|{job['state']}")
    return 0


def scancel(args: list[str]) -> int:
    _, ids = _options(args)
    for job_id in ids:
        path = JOBS / f"{job_id}.json"
        if path.exists():
            job = json.loads(path.read_text())
            _write_job(job_id, state="CANCELLED")
            if "pid" in job:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job["pid"], signal.SIGTERM)
    return 0


def srun(args: list[str]) -> int:
    """Runs the command after srun's own options (`sh -s` reads the script from stdin)."""
    command = list(args)
    while command and command[0].startswith("-"):
        command.pop(0)
    return subprocess.run(command).returncode


def sinfo(args: list[str]) -> int:
    print("PARTITION\ncpu*\ngpu")
    return 0


def account(args: list[str]) -> int:
    print(ACCOUNT)
    return 0


COMMANDS = {
    "sbatch": sbatch,
    "squeue": _states,
    "sacct": _states,
    "scancel": scancel,
    "srun": srun,
    "sinfo": sinfo,
    "sacctmgr": account,
    "sshare": account,
}

if __name__ == "__main__":
    if sys.argv[1] == "_run":
        sys.exit(_run(sys.argv[2]))
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
