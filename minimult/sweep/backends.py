"""Where a sweep's runs execute: a local process pool (one single-thread worker per core, or one per
GPU) or one Ray task per group of runs. Both call `worker.run_group` and report every `Outcome`."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from minimult.errors import MinimultError
from minimult.sweep import memory
from minimult.sweep.plan import Outcome
from minimult.sweep.worker import init_local_worker, run_group


def run_local(groups, jobs, gpus, threads, report, tick, every, limit: int | None = None,
              longest: dict | None = None) -> None:
    """Run the groups on `jobs` workers; with a memory `limit` (bytes, `memory.budget`) a group starts
    only while it fits beside the running ones (`memory.admit`, with `longest` sequence per data config),
    so a worker may wait."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    for i in range(jobs):
        queue.put(gpus[i % len(gpus)] if gpus else None)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=init_local_worker,
                             initargs=(queue, os.getpid())) as pool:
        waiting, futures = list(groups), {}

        def start() -> None:
            for g in memory.admit(waiting, list(futures.values()), jobs, limit, longest):
                waiting[:] = [w for w in waiting if w is not g]
                try:
                    with _interrupts_blocked():  # a worker it starts inherits the mask: init_local_worker
                        futures[pool.submit(run_group, g, threads)] = g
                except BrokenProcessPool as e:  # a worker was killed: the pool takes nothing more
                    for rest in [g, *waiting]:
                        _report_failure(e, rest, report)
                    waiting.clear()
                    return

        try:
            start()
            while futures:
                ready, _ = wait(futures, timeout=every, return_when=FIRST_COMPLETED)
                for future in ready:  # before the status line: a run that ended here is no run finished elsewhere
                    _report_local(future, futures.pop(future), report)
                tick({t.run_dir for g in futures.values() for t in g})
                start()
        except KeyboardInterrupt:
            _interrupt_workers(pool)
            raise


@contextmanager
def _interrupts_blocked():
    """SIGINT blocked in this thread (a Ctrl-C meanwhile is taken by another thread, or when unblocked)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _interrupt_workers(pool: ProcessPoolExecutor, grace: float = 60.0) -> None:
    """Pass an interrupt on to the workers (this process's only children), as Ctrl-C in a terminal does (it
    reaches the whole process group), shut the pool (a worker whose run the interrupt ended would otherwise wait
    for more work until the grace ran out), and wait up to `grace` seconds for them to stop. A sweep interrupted
    on its own (`kill -INT PID`) would otherwise say so and then wait, at exit, for every running run to finish
    training; one that left at once would pull its queues from under a worker still starting (a traceback from
    its unpickling). Each worker stops where it is (one still starting, once started); its run keeps its last
    checkpoint."""
    children = multiprocessing.active_children()
    for process in children:
        try:
            os.kill(process.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + grace
    for process in children:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.terminate()


def _report_local(future, group, report) -> None:
    try:
        outcomes = future.result()
    except SystemExit:  # its worker was interrupted (worker._stop_quietly): the sweep stops as on Ctrl-C
        raise KeyboardInterrupt from None
    except Exception as e:  # the worker process itself died (killed, out of memory)
        _report_failure(e, group, report)
        return
    for outcome in outcomes:
        report(outcome)


def _report_failure(e: Exception, group, report) -> None:
    why = ("; killed from outside, most often for memory (fewer --jobs, or see minimult.sweep.memory); "
           "the same sweep command resumes it from its last checkpoint") if isinstance(e, BrokenProcessPool) else ""
    for t in group:
        report(Outcome(t, "failed", f"worker process died: {type(e).__name__}: {e}{why}"))


def _token_auth(log) -> str:
    """For a cluster reached by address: Ray >= 2.52 clusters started with `ray start` use token
    authentication (default on in current releases), and a client must say so with RAY_AUTH_MODE=token.
    When the user has not chosen a mode and a token is at hand (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, or
    the ~/.ray/auth_token that `ray start` writes), use it. Returns a hint for the error line."""
    hint = ("the cluster may use token authentication: set RAY_AUTH_MODE=token and its token "
            "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token, see `ray get-auth-token`)")
    if "RAY_AUTH_MODE" in os.environ:
        return hint
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
            os.path.isfile(os.path.expanduser("~/.ray/auth_token")):
        os.environ["RAY_AUTH_MODE"] = "token"
        log("ray: connecting with token authentication (RAY_AUTH_MODE=token; set RAY_AUTH_MODE to choose)")
        return "check the token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) is the cluster's"
    return hint


def check_reachable(address: str, seconds: float = 10.0) -> None:
    """A cluster address `HOST:PORT` (or `ray://HOST:PORT`) must answer a TCP connection: Ray itself retries one
    that does not for minutes, a line a few seconds."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():  # "auto" and other forms: Ray's to read
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as e:
        raise MinimultError(f"cannot reach a Ray cluster at {address}: {e.strerror or e} (start "
                            f"one there with `ray start --head --port {port}`, or check --address)") from None


def run_ray(groups, jobs, address, report, log, tick, every) -> None:
    if address is not None:
        check_reachable(address)
    hint = _token_auth(log) if address is not None else ""  # before Ray is imported: it reads the mode then
    try:
        import ray  # lazy: an optional dependency (the sweep extra)
    except ImportError:
        raise MinimultError("the ray backend needs Ray: pip install 'ray[default]>=2.9'") from None
    started = not ray.is_initialized()
    if started:
        kwargs = {"include_dashboard": False, "logging_level": "warning", "log_to_driver": False}
        try:
            if address is None:  # a private local Ray, never an unrelated running cluster
                ray.init(address="local", num_cpus=jobs, **kwargs)
            else:
                ray.init(address=address, **kwargs)
        except Exception as e:
            raise MinimultError(f"cannot start/connect to Ray{f' at {address}' if address else ''}: "
                                f"{type(e).__name__}: {e}" + (f"; {hint}" if hint else "")) from None
    try:
        resources = ray.cluster_resources()
        gpus = 1 if resources.get("GPU", 0) >= 1 else 0
        log(f"ray: {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs; one task per group of runs "
            f"(num_cpus=1, num_gpus={gpus})")
        remote = ray.remote(run_group).options(num_cpus=1, num_gpus=gpus)
        refs = {remote.remote(g, 1): g for g in groups}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=every)
            for ref in ready:  # reported before the status line, as run_local does
                try:
                    outcomes = ray.get(ref)
                except ray.exceptions.RayError as e:  # the task's worker died
                    why = str(e).strip().splitlines()[-1] if str(e).strip() else ""
                    outcomes = [Outcome(t, "failed", f"ray task failed: {type(e).__name__}: {why}") for t in refs[ref]]
                for outcome in outcomes:
                    report(outcome)
            tick({t.run_dir for ref in pending for t in refs[ref]})
    finally:
        if started:
            ray.shutdown()
