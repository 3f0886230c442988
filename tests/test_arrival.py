"""A file read while it is downloaded (kernel_wheels.arrival): the reader gets exactly the
verified bytes, starts over when the transfer does, and never hangs. The "downloader"
here is a thread writing a real file the way hub.files does (partial file, flush, rename
into place); the Hub-level behaviour is covered by test_to_wheel_hub_faults."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kernel_wheels.convert.pipeline import _lift_when_arrived
from kernel_wheels.kernel.arrival import Arrival, ArrivalCancelled, ArrivalRestarted
from kernel_wheels.wheel.compression import DeflateSlots

CONTENT = bytes(range(256)) * 4096  # 1 MiB
PIECE = 64 << 10


def download(arrival: Arrival, partial: Path, data: bytes, *, between: Callable[[int], None] = lambda _: None,
             rename: bool = True) -> None:
    """Write ``data`` to ``partial`` piece by piece, telling ``arrival``; then place it
    (hub.files' order: the file is created, then announced)."""
    with partial.open("wb") as out:
        arrival.started(partial)
        for start in range(0, len(data), PIECE):
            out.write(data[start:start + PIECE])
            out.flush()
            arrival.received(min(start + PIECE, len(data)))
            between(start)
    if rename:
        os.replace(partial, arrival.final)


def read_all(arrival: Arrival, read_size: int = 100_000, cancel: threading.Event | None = None) -> bytes:
    return b"".join(arrival.chunks(read_size, cancel))


def eventually(condition: Callable[[], bool], seconds: float = 10) -> bool:
    stop = threading.Event()
    for _ in range(int(seconds / 0.01)):
        if condition():
            return True
        stop.wait(0.01)
    return condition()


def test_reader_follows_the_transfer_and_gets_the_last_bytes_only_once_verified(tmp_path: Path) -> None:
    arrival = Arrival(tmp_path / "file.so", len(CONTENT))
    got: list[bytes] = []
    read_while_arriving: list[bool] = []
    reader = threading.Thread(target=lambda: got.extend(arrival.chunks(PIECE)), daemon=True)

    def halfway(start: int) -> None:
        if start == len(CONTENT) // 2:
            # The reader gets the first half while the transfer is still running.
            read_while_arriving.append(eventually(lambda: len(got) * PIECE > len(CONTENT) // 2))

    reader.start()
    download(arrival, tmp_path / "file.so.incomplete", CONTENT, between=halfway)
    assert read_while_arriving == [True]
    # Every byte received and placed, but not yet verified: the last piece is held back.
    assert eventually(lambda: len(got) == len(CONTENT) // PIECE - 1)
    threading.Event().wait(0.2)
    assert b"".join(got) == CONTENT[:-PIECE]
    arrival.finished()
    reader.join(10)
    assert not reader.is_alive()
    assert b"".join(got) == CONTENT


def test_a_transfer_that_starts_over_makes_the_reader_start_over(tmp_path: Path) -> None:
    arrival = Arrival(tmp_path / "file.so", len(CONTENT))
    corrupted = bytes([CONTENT[0] ^ 0xFF]) + CONTENT[1:]
    got: list[bytes] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for chunk in arrival.chunks(PIECE):
                got.append(chunk)
        except BaseException as exc:  # noqa: BLE001 - the test looks at what was raised
            errors.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # First try: every byte arrives, the digest does not match, the file is never placed.
    download(arrival, tmp_path / "file.so.incomplete", corrupted, rename=False)
    assert eventually(lambda: len(got) == len(CONTENT) // PIECE - 1)  # the reader is following it
    (tmp_path / "file.so.incomplete").unlink()
    download(arrival, tmp_path / "file.so.incomplete", CONTENT)  # the retry
    arrival.finished()
    reader.join(10)
    assert [type(e) for e in errors] == [ArrivalRestarted]
    # What the converter then does: read the finished file.
    assert read_all(arrival) == CONTENT


def test_a_transfer_over_before_the_reader_opens_it(tmp_path: Path) -> None:
    arrival = Arrival(tmp_path / "file.so", len(CONTENT))
    download(arrival, tmp_path / "file.so.incomplete", CONTENT)  # renamed away already
    arrival.finished()
    assert read_all(arrival) == CONTENT


def test_a_file_already_in_the_cache(tmp_path: Path) -> None:
    arrival = Arrival(tmp_path / "file.so", len(CONTENT))
    arrival.final.write_bytes(CONTENT)
    arrival.finished()  # nothing was downloaded
    assert read_all(arrival) == CONTENT


def test_a_download_that_gives_up_stops_the_reader(tmp_path: Path) -> None:
    arrival = Arrival(tmp_path / "file.so", len(CONTENT))
    download(arrival, tmp_path / "file.so.incomplete", CONTENT[: len(CONTENT) // 2], rename=False)
    arrival.failed()
    with pytest.raises(ArrivalRestarted):
        read_all(arrival)
    assert arrival.wait() is False


def test_cancel_wakes_a_waiting_reader(tmp_path: Path) -> None:
    arrival = Arrival(tmp_path / "file.so", len(CONTENT))
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(ArrivalCancelled):
        read_all(arrival, cancel=cancel)  # nothing ever arrives
    with pytest.raises(ArrivalCancelled):
        arrival.wait(cancel)


def test_the_downloads_core_goes_back_to_deflate_when_the_last_file_is_here(tmp_path: Path) -> None:
    """While files arrive, a conversion deflates on one core fewer; once the last one is
    here, on all (a single variant was written on one core until it was done, 0.2 s
    slower for 48 MB)."""
    cancel = threading.Event()
    nothing_arriving = DeflateSlots(1)
    _lift_when_arrived(nothing_arriving, [], cancel)
    assert nothing_arriving.lifted

    slots = DeflateSlots(1)
    first, last = Arrival(tmp_path / "a.so", 1), Arrival(tmp_path / "b.so", 1)
    first.finished()
    _lift_when_arrived(slots, [first, last], cancel)
    threading.Event().wait(0.3)
    assert not slots.lifted
    last.finished()
    assert eventually(lambda: slots.lifted)

    abandoned = DeflateSlots(1)
    never = Arrival(tmp_path / "c.so", 1)
    _lift_when_arrived(abandoned, [never], cancel)
    cancel.set()  # the run stops: the waiting thread ends without lifting
    threading.Event().wait(0.3)
    assert not abandoned.lifted


def test_a_variant_folder_never_shows_a_half_placed_link(tmp_path: Path) -> None:
    """The converter lists a variant folder while its binaries are still being linked in
    (a file the HF cache already holds, from another version, is linked at once): it must
    only ever see finished links, never a temporary name (which it would pack, or refuse
    as a broken link). Placed 300 times while another thread lists the folder."""
    from kernel_wheels.hub.files import HubCacheRepo

    repo = HubCacheRepo(tmp_path / "models--org--name", tmp_path / ".locks" / "models--org--name")
    repo.locks.mkdir(parents=True)
    blob = repo.folder / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"\x7fELF" + bytes(100))
    variant = repo.pointer("c" * 40, "build/v")
    seen: set[str] = set()
    done = threading.Event()

    def list_until_done() -> None:
        while not done.is_set():
            if variant.is_dir():
                seen.update(os.listdir(variant))

    lister = threading.Thread(target=list_until_done, daemon=True)
    lister.start()
    try:
        for number in range(300):
            repo._link(variant / f"_ext_{number}.abi3.so", blob)
    finally:
        done.set()
        lister.join(10)
    assert seen and seen <= {f"_ext_{number}.abi3.so" for number in range(300)}
    assert all((variant / name).read_bytes() == blob.read_bytes() for name in seen)
