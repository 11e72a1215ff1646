"""text8 download against a local HTTP server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import resource
import socket
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedlab.data import download
from embedlab.data.download import fetch_text8, resolve_cache_dir
from embedlab.errors import InputError

TEXT = b" anarchism originated as a term of abuse " * 200


def make_zip(member: str = "text8", data: bytes = TEXT) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, data)
    return buf.getvalue()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """Serve tmp_path/www on a free port; yield (base URL, served folder)."""
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    www = tmp_path / "www"
    www.mkdir()
    handler = functools.partial(_Quiet, directory=str(www))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", www
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def cache_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_download_verifies_extracts_and_caches(server: tuple[str, Path], tmp_path: Path) -> None:
    base, www = server
    data = make_zip()
    (www / "text8.zip").write_bytes(data)
    cache = tmp_path / "cache"
    path = fetch_text8(cache, url=f"{base}/text8.zip", progress=False, expected_size=len(data),
                       sha1=hashlib.sha1(data).hexdigest())
    assert path == cache / "text8" and path.read_bytes() == TEXT
    assert cache_files(cache) == ["text8"]  # no archive, no .part left behind
    (www / "text8.zip").unlink()  # a second call must not need the server
    assert fetch_text8(cache, url=f"{base}/text8.zip", progress=False) == path


def test_no_progress_bar_when_stderr_is_not_a_terminal(
        server: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the bar is for people; logs and pipes stay clean (an error stays one line)
    base, www = server
    data = make_zip()
    (www / "text8.zip").write_bytes(data)
    fetch_text8(tmp_path / "c", url=f"{base}/text8.zip", progress=True, expected_size=None,
                sha1=hashlib.sha1(data).hexdigest())
    assert capsys.readouterr() == ("", "")


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal (tqdm asks ``isatty()`` when the bar is made)."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("progress", [True, False])
def test_progress_bar_when_stderr_is_a_terminal(
        server: tuple[str, Path], tmp_path: Path, progress: bool,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # a bar for the download (its total from Content-Length), none for the extraction, and
    # nothing left on the screen afterwards; progress=False (--no-progress) draws nothing
    base, www = server
    data = make_zip()
    (www / "text8.zip").write_bytes(data)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    path = fetch_text8(tmp_path / "c", url=f"{base}/text8.zip", progress=progress,
                       expected_size=None, sha1=hashlib.sha1(data).hexdigest())
    assert path.read_bytes() == TEXT
    drawn = terminal.getvalue()
    if not progress:
        assert drawn == ""
    else:
        assert drawn.startswith("\rtext8.zip:") and f"/{len(data)} [" in drawn
        assert drawn.count("text8") == 1  # the extraction draws no bar of its own
        assert "\n" not in drawn and drawn.endswith("\r")
        assert drawn.split("\r")[-2].strip() == ""  # the bar's line is blanked when done
    assert capsys.readouterr().out == ""


def test_bad_checksum_is_refused_and_not_cached(server: tuple[str, Path], tmp_path: Path) -> None:
    base, www = server
    data = make_zip()
    (www / "text8.zip").write_bytes(data)
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as err:
        fetch_text8(cache, url=f"{base}/text8.zip", progress=False, expected_size=len(data),
                    sha1="0" * 40)
    msg = str(err.value)
    assert msg.startswith(f"could not download text8 from {base}/text8.zip (SHA-1 ")
    # the hint fits both commands that take 'text8': prepare has no --corpus flag
    assert msg.endswith("; check your network or use a local copy instead of 'text8' (embedlab "
                        "train --corpus PATH, or embedlab prepare PATH)")
    assert cache_files(cache) == []


def test_wrong_size_is_refused(server: tuple[str, Path], tmp_path: Path) -> None:
    base, www = server
    (www / "text8.zip").write_bytes(make_zip())
    with pytest.raises(InputError, match=r"expected 31,344,016\); check your network"):
        fetch_text8(tmp_path / "c", url=f"{base}/text8.zip", progress=False)
    assert cache_files(tmp_path / "c") == []


def test_http_error(server: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = server
    with pytest.raises(InputError,
                       match=r"\(HTTP 404 .*\); check your network or use a local copy"):
        fetch_text8(tmp_path / "c", url=f"{base}/missing.zip", progress=False)
    assert cache_files(tmp_path / "c") == []


def test_server_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port that was free a moment ago and has no listener now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("EMBEDLAB_TEXT8_URL", f"http://127.0.0.1:{port}/text8.zip")
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "envcache"))
    with pytest.raises(InputError, match=rf"could not download text8 from http://127\.0\.0\.1:"
                                         rf"{port}/text8\.zip \(.*refused.*\); check your network"):
        fetch_text8(progress=False)
    assert cache_files(tmp_path / "envcache") == []


def test_a_failed_download_names_the_file_text8_in_this_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """word2vec.c's demo leaves ./text8 behind; offline, the one-line error says to pass it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("EMBEDLAB_TEXT8_URL", f"http://127.0.0.1:{port}/text8.zip")
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path / "envcache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "text8").write_bytes(TEXT)
    with pytest.raises(InputError, match=r"check your network or use a local copy instead of "
                                         r"'text8' \(pass \./text8 to use the file text8 in "
                                         r"this folder\)$"):
        fetch_text8(progress=False)


def test_zip_without_text8_member(server: tuple[str, Path], tmp_path: Path) -> None:
    base, www = server
    data = make_zip(member="other")
    (www / "text8.zip").write_bytes(data)
    with pytest.raises(InputError, match="not a zip holding 'text8'"):
        fetch_text8(tmp_path / "c", url=f"{base}/text8.zip", progress=False,
                    expected_size=len(data), sha1=None)
    assert cache_files(tmp_path / "c") == []


class _CutShort(_Quiet):
    """Starts a chunked response, sends part of one chunk, and hangs up."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"1000\r\n" + b"x" * 100)
        self.wfile.flush()
        self.close_connection = True


def test_a_transfer_cut_short_is_a_one_line_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # http.client raises IncompleteRead here, which is not an OSError: it must not escape as
    # a traceback.
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CutShort)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/text8.zip"
        with pytest.raises(InputError, match=r"could not download text8 from .*IncompleteRead"
                                             r".*; check your network or use a local copy"):
            fetch_text8(tmp_path / "c", url=url, progress=False, expected_size=None, sha1=None)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
    assert cache_files(tmp_path / "c") == []


def test_a_full_disk_while_extracting_keeps_the_verified_archive(
        server: tuple[str, Path], tmp_path: Path) -> None:
    # The download was fine; blaming the network and deleting 31 MB of verified archive would
    # send the user to download it again for nothing.
    base, www = server
    data = make_zip(data=TEXT * 20)  # 164 kB of text, a few kB zipped
    (www / "text8.zip").write_bytes(data)
    cache = tmp_path / "cache"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # writes past 100 kB: EFBIG
    try:
        with pytest.raises(InputError, match=r"cannot write text8 into the cache folder .*cache "
                                             r"\(File too large\); free some space or set "
                                             r"EMBEDLAB_CACHE"):
            fetch_text8(cache, url=f"{base}/text8.zip", progress=False,
                        expected_size=len(data), sha1=hashlib.sha1(data).hexdigest())
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert cache_files(cache) == ["text8.zip"]
    (www / "text8.zip").unlink()  # the next call extracts the kept archive, no download
    path = fetch_text8(cache, url=f"{base}/text8.zip", progress=False, expected_size=len(data),
                       sha1=hashlib.sha1(data).hexdigest())
    assert path.read_bytes() == TEXT * 20
    assert cache_files(cache) == ["text8"]


def test_cache_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EMBEDLAB_CACHE", str(tmp_path))
    assert resolve_cache_dir() == tmp_path
    assert resolve_cache_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("EMBEDLAB_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert resolve_cache_dir() == tmp_path / "home" / ".cache" / "embedlab"
    # one cache for the download and the native kernel's builds
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    from embedlab.engines.native import cache_dir

    assert resolve_cache_dir() == cache_dir() == tmp_path / "xdg" / "embedlab"


def test_text8_downloaded_before_the_cache_followed_xdg_is_still_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A text8 in ~/.cache/embedlab is read, not downloaded again (offline: refused)."""
    monkeypatch.delenv("EMBEDLAB_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    earlier = tmp_path / "home" / ".cache" / "embedlab" / "text8"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(" anarchism originated")
    assert fetch_text8(url="http://127.0.0.1:9/none") == earlier


def test_published_constants() -> None:
    assert download.TEXT8_URL == "http://mattmahoney.net/dc/text8.zip"
    assert download.TEXT8_ZIP_SIZE == 31_344_016
    assert len(download.TEXT8_ZIP_SHA1) == 40


def test_a_file_named_text8_here_is_named_in_a_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """word2vec.c's demo leaves ./text8 behind: the name 'text8' still means the cached data
    set, and one line says how to use the file instead; the cached copy itself is no note."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "text8").write_bytes(TEXT)
    monkeypatch.chdir(tmp_path)
    assert fetch_text8(cache, progress=False) == cache / "text8"
    assert capsys.readouterr().err == ""
    (tmp_path / "text8").write_bytes(b"other words\n")
    assert fetch_text8(cache, progress=False) == cache / "text8"
    assert capsys.readouterr().err == (
        f"embedlab: note: 'text8' names the data set, read from the cache ({cache / 'text8'}), "
        "not the file text8 in this folder; pass ./text8 to use that file\n")
    monkeypatch.chdir(cache)  # the cached file itself
    assert fetch_text8(cache, progress=False) == cache / "text8"
    assert capsys.readouterr().err == ""
    # nothing in the cache and no network: the error alone, no note that it was read from there
    monkeypatch.chdir(tmp_path)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(InputError, match="could not download text8"):
        fetch_text8(tmp_path / "empty", url=f"http://127.0.0.1:{port}/text8.zip",
                    progress=False)
    assert capsys.readouterr().err == ""
