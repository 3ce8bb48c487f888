"""Runs INSIDE the sandbox: a forkserver that imports an engine once and forks a child per job.

`python3 sandbox_server.py ENGINE` is a JSON-lines worker (jsonlines_worker.py, shipped beside it).
It boots once the engine is imported, then takes one job per request. Each job runs in a forked
child, in a fresh empty directory, with the seeds set again, as a cold `sandbox_ENGINE.py` run
would.

What the child prints (its report line, the engine's output) goes to a file of its own. The reply
returns it with how the child ended: {"exit_code", "timed_out", "cpu_ms", "wall_ms", "output"}. A
child past its hard time limit is killed with its process group. Importing newclid costs seconds;
forking costs milliseconds.
"""

import contextlib
import importlib
import os
import shutil
import signal
import sys
import time
import traceback

import jsonlines_worker
import sandbox_common as common

OUTPUT_KEEP = 8 << 20  # the tail of a job's output returned to the kit (its report line is last)


class Forkserver:
    def __init__(self, engine):
        self.engine_name = engine
        self.driver = None
        self.engine = None
        self.missing = None

    def boot(self):
        self.driver = importlib.import_module(f"sandbox_{self.engine_name}")
        try:
            self.engine = self.driver.load_engine()
        except ImportError as error:
            self.missing = str(error)
        return {"engine": self.engine_name, "engine_missing": self.missing}

    def handle(self, job, job_id):
        job["id"] = job_id
        job["data_dir"] = os.getcwd()
        return _serve(job, self.engine, self.missing, self.driver.solve)


def _serve(job, engine, missing, solve):
    workdir = os.path.abspath(f"job-{job['id']}")
    output = workdir + ".out"
    os.mkdir(workdir)
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: one job, then exit without running the server's cleanup
        status = 0
        try:
            jsonlines_worker.detach()
            os.setpgid(0, 0)
            out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.close(out)
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
    facts["output"] = _tail(output)
    shutil.rmtree(workdir, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.remove(output)
    return facts


def _tail(path):
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - OUTPUT_KEEP))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


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


def main():
    server = Forkserver(sys.argv[1])
    jsonlines_worker.serve(server.boot, server.handle)


if __name__ == "__main__":
    main()
