"""Runs INSIDE the sandbox: a forkserver that imports an engine once and forks a child per job.

`python3 sandbox_server.py ENGINE` prints `PROOFLOCK-AG-READY` once the engine is imported,
then reads one job (JSON) per line on stdin. Each job runs in a forked child, in a fresh empty
directory, with the seeds set again, exactly as a cold `sandbox_ENGINE.py` run would; the child
prints its report line and the server then prints `PROOFLOCK-AG-DONE <id> {exit facts}`. A child
past its hard time limit is killed with its process group. Importing newclid costs seconds;
forking costs milliseconds.
"""

import contextlib
import importlib
import json
import os
import shutil
import signal
import sys
import time
import traceback

import sandbox_common as common

READY = "PROOFLOCK-AG-READY"
DONE = "PROOFLOCK-AG-DONE"


def main():
    driver = importlib.import_module(f"sandbox_{sys.argv[1]}")
    try:
        engine, missing = driver.load_engine(), None
    except ImportError as error:
        engine, missing = None, str(error)
    _say(READY)
    for line in sys.stdin:
        job = json.loads(line)
        job["data_dir"] = os.getcwd()
        facts = _serve(job, engine, missing, driver.solve)
        _say(f"{DONE} {job['id']} {json.dumps(facts, sort_keys=True)}")


def _serve(job, engine, missing, solve):
    workdir = os.path.abspath(f"job-{job['id']}")
    os.mkdir(workdir)
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: one job, then exit without running the server's cleanup
        status = 0
        try:
            os.setpgid(0, 0)
            os.chdir(workdir)
            job["started"] = time.monotonic()
            if missing is not None:
                common.report(status="engine_missing", message=missing)
            else:
                common.run_job(job, engine, solve)
        except BaseException:  # noqa: BLE001 - the parent notices the missing report
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    facts = _wait(pid, job["hard_timeout_s"], started)
    shutil.rmtree(workdir, ignore_errors=True)
    return facts


def _wait(pid, limit_s, started):
    timed_out = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > limit_s:
            timed_out = True
            _kill(pid)
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    _kill(pid)  # whatever the job left running in its group
    return {
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "cpu_ms": int((usage.ru_utime + usage.ru_stime) * 1000),
        "wall_ms": int((time.monotonic() - started) * 1000),
    }


def _kill(pid):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
