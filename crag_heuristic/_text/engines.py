"""Where corpus statistics are counted: this process, or a Dask cluster.

Both engines run the same function on the same partitions (see
:mod:`crag_heuristic._text.counting`) and the partial counts are merged the same
way, so the statistics are equal, bit for bit, whatever the engine.

* :class:`LocalEngine`: one partition after another in this process, with one
  analyzer whose term cache lasts the whole build.
* :class:`DaskEngine`: each partition is a task on a Dask cluster
  (``dask.distributed``, the ``dask`` extra): a ``LocalCluster`` of its own by
  default, or the scheduler at ``scheduler``, or a ``Client`` you pass. Texts
  held in memory are scattered to the workers partition by partition, at most
  ``in_flight`` at a time; partitions of a documents file are byte ranges that
  the workers read themselves (the file must be at the same path on every
  worker: a shared file system). Every worker needs crag-heuristic installed,
  at the same version as the client.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from .._exceptions import ConfigError, StatsEngineError
from .._optional import requires


@runtime_checkable
class StatsEngine(Protocol):
    """Runs the counting of a corpus's partitions: in this process, or on a cluster.

    ``map_unordered`` applies ``function`` (a module-level function of
    picklable arguments) to each partition and yields the results as they
    finish, in any order; it reads ``partitions`` as it goes, so that a corpus
    larger than memory can stream through. Errors the function raises reach
    the caller as they are; the engine's own failures are a
    :class:`~crag_heuristic.StatsEngineError`.
    """

    name: str

    def map_unordered(
        self, function: Callable[[Any], Any], partitions: Iterable[Any]
    ) -> Iterator[Any]: ...


class LocalEngine:
    """Count every partition in this process, one after another."""

    name = "local"

    def __repr__(self) -> str:
        return "LocalEngine()"

    def map_unordered(
        self, function: Callable[[Any], Any], partitions: Iterable[Any]
    ) -> Iterator[Any]:
        return map(function, partitions)


class DaskEngine:
    """Count partitions as tasks on a Dask cluster.

    Args:
        scheduler: the scheduler's address (``"tcp://10.0.0.5:8786"``);
            ``None`` starts a ``LocalCluster`` for the build and closes it after.
        client: a ``dask.distributed.Client`` of your own (then ``scheduler``
            must be ``None``); left open.
        n_workers: workers of the local cluster.
        threads_per_worker: threads of each local worker (counting holds the
            GIL: one thread and more workers is what scales).
        processes: local workers in processes (``True``) or threads of this
            process (``False``: quick to start, for tests).
        in_flight: partitions submitted and not yet merged, at most (default:
            twice the workers): bounds the memory the texts take on the way.
        timeout: seconds to wait for the scheduler.

    Raises:
        ConfigError: a bad argument.
    """

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        client: Any = None,
        n_workers: int = 2,
        threads_per_worker: int = 1,
        processes: bool = True,
        in_flight: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
            raise ConfigError("scheduler", scheduler, "must be a scheduler address or None")
        if scheduler is not None and client is not None:
            raise ConfigError("client", client, "give a scheduler address or a client, not both")
        for field, value in (
            ("n_workers", n_workers),
            ("threads_per_worker", threads_per_worker),
            ("in_flight", 1 if in_flight is None else in_flight),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(field, value, "must be an integer >= 1")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError("timeout", timeout, "must be a number of seconds > 0")
        self.scheduler = scheduler
        self.client = client
        self.n_workers = n_workers
        self.threads_per_worker = threads_per_worker
        self.processes = bool(processes)
        self.in_flight = in_flight
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        where = self.scheduler or ("a client" if self.client is not None else "a LocalCluster")
        return f"DaskEngine({where})"

    def map_unordered(
        self, function: Callable[[Any], Any], partitions: Iterable[Any]
    ) -> Iterator[Any]:
        distributed = _distributed()
        client, close = self._connect(distributed)
        try:
            yield from self._run(distributed, client, function, partitions)
        finally:
            close()

    def _connect(self, distributed: Any) -> tuple[Any, Callable[[], None]]:
        if self.client is not None:
            return self.client, lambda: None
        try:
            if self.scheduler is not None:
                client = distributed.Client(self.scheduler, timeout=self.timeout)
                return client, client.close
            loopback = "127.0.0.1"  # nothing of the local cluster listens beyond this host
            cluster = distributed.LocalCluster(
                n_workers=self.n_workers,
                threads_per_worker=self.threads_per_worker,
                processes=self.processes,
                dashboard_address=f"{loopback}:0",
                worker_dashboard_address=f"{loopback}:0",
                **({"host": loopback} if self.processes else {}),  # threads talk in process
            )
            client = distributed.Client(cluster, timeout=self.timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            where = self.scheduler or "a LocalCluster"
            raise StatsEngineError(
                f"cannot reach the Dask scheduler at {where}: {exc}", engine=self.name
            ) from exc

        def close() -> None:
            client.close()
            cluster.close()

        return client, close

    def _run(
        self,
        distributed: Any,
        client: Any,
        function: Callable[[Any], Any],
        partitions: Iterable[Any],
    ) -> Iterator[Any]:
        import uuid  # here: a tenth of a command line's start otherwise

        limit = self.in_flight or 2 * max(1, len(client.scheduler_info().get("workers", {})))
        run = uuid.uuid4().hex[:12]
        pending = distributed.as_completed(loop=client.loop)
        todo = iter(partitions)

        def submit(partition: Any) -> None:
            data = client.scatter(partition, direct=False, hash=False)
            key = f"crag-count-{run}-{next(counter)}"
            pending.add(client.submit(function, data, key=key, pure=False))

        counter = itertools.count()
        for partition in itertools.islice(todo, limit):
            submit(partition)
        try:
            for future in pending:
                try:
                    result = future.result()
                except distributed.KilledWorker as exc:
                    raise StatsEngineError(f"a Dask worker died: {exc}", engine=self.name) from exc
                finally:
                    future.release()
                nxt = next(todo, None)
                if nxt is not None:
                    submit(nxt)
                yield result
        except BaseException:  # a bad text, a dead worker, the caller gone: stop the rest
            client.cancel(list(pending.futures))
            raise


def _distributed() -> Any:
    with requires("dask", "DaskEngine"):
        import dask.distributed as distributed
    return distributed


def resolve_engine(engine: StatsEngine | str) -> StatsEngine:
    """``"local"``, ``"dask"`` (a :class:`DaskEngine` on a LocalCluster) or an engine.

    Raises:
        ConfigError: anything else.
    """
    if engine == "local":
        return LocalEngine()
    if engine == "dask":
        return DaskEngine()
    if isinstance(engine, StatsEngine):
        return engine
    raise ConfigError("engine", engine, "must be 'local', 'dask' or a StatsEngine")
