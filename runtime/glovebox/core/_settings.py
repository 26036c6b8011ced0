"""Every setting glovebox takes from the environment, read here and nowhere else.

==============================  ================================================
variable                        read by
==============================  ================================================
``GLOVEBOX_HOME``               :func:`home_dir` (and the build cache)
``XDG_DATA_HOME``               :func:`home_dir`, when ``GLOVEBOX_HOME`` is unset
``XDG_CACHE_HOME``              :func:`build_cache_dir`, when no home is set
``ZIG_GLOBAL_CACHE_DIR``        :func:`zig_cache_dir` (Zig's own variable)
``CARGO_HOME``                  :func:`cargo_home_dir` (cargo's own variable)
``CARGO_TARGET_DIR``            :func:`cargo_target_dir` (cargo's own variable)
``GOCACHE``, ``GOMODCACHE``     :func:`go_cache_dirs` (Go's own variables)
``GLOVEBOX_POLICY``             :func:`policy_file`
``GLOVEBOX_GRANTS``             :func:`grants_file`
``GLOVEBOX_REQUIRE_SIGNATURES`` :func:`require_signatures`
``GLOVEBOX_LOG_FORMAT``         :func:`log_format`
``GLOVEBOX_OCI_CONFIG``         :func:`docker_config_file` (else ``DOCKER_CONFIG``)
``GLOVEBOX_OCI_USERNAME``       :func:`oci_login` (with ``_PASSWORD``,
                                ``_PASSWORD_FILE`` and ``_HOST``)
``GLOVEBOX_COMPILE_TIMEOUT_S``  :func:`compile_timeout_s`
``GLOVEBOX_NATIVE``             :func:`native_enabled`
``GLOVEBOX_SECRETS_KEY``        :func:`secrets_key_ref`
==============================  ================================================

An empty variable counts as unset. Every function reads the environment when
called, so a value given explicitly (``Runtime(home=...)``, ``glovebox --home``)
always wins and nothing is cached at import time. The secrets a policy grants
(the ``env`` provider of a ``SecretRule``) are data, not settings: they are read
by :mod:`glovebox.capabilities._secrets`.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "build_cache_dir",
    "cargo_home_dir",
    "cargo_target_dir",
    "check_home",
    "compile_timeout_s",
    "docker_config_file",
    "go_cache_dirs",
    "grants_file",
    "home_dir",
    "log_format",
    "native_enabled",
    "oci_login",
    "policy_file",
    "quiet_ray_failure_handler",
    "require_signatures",
    "secrets_key_ref",
    "toolchain_cache_dir",
    "trusted_keys_dir",
    "zig_cache_dir",
]

PathLike = str | os.PathLike[str]


def _get(name: str) -> str | None:
    return os.environ.get(name) or None


def home_dir(home: PathLike | None = None) -> Path:
    """``home`` if given, else ``GLOVEBOX_HOME``, else ``$XDG_DATA_HOME/glovebox``, else ``~/.local/share/glovebox``."""
    if home is not None:
        return Path(home)
    env = _get("GLOVEBOX_HOME")
    if env:
        return Path(env)
    data = _get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "glovebox"


def check_home(home: PathLike) -> Path:
    """``home`` as a Path, once it is known to be usable as a home; nothing is created.

    A home is usable when it is a directory or does not exist yet and no part
    of its path is a file.

    Raises:
        NotADirectoryError: ``home``, or a folder above it, is a file (the message names both).
    """
    path = Path(home)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"the glovebox home {path} is a file, not a directory")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(f"the glovebox home {path} cannot be made: {parent} is a file")
            break
    return path


def trusted_keys_dir(home: PathLike | None = None) -> Path:
    """Where a home keeps the public keys it trusts: ``HOME/trusted_keys``."""
    return home_dir(home) / "trusted_keys"


def build_cache_dir(home: PathLike | None = None) -> Path:
    """Where Python builds are cached: ``HOME/cache/build`` when a home is given or ``GLOVEBOX_HOME``
    is set, else ``$XDG_CACHE_HOME/glovebox/build``, else ``~/.cache/glovebox/build``."""
    if home is None:
        home = _get("GLOVEBOX_HOME")
    if home is not None:
        return Path(home) / "cache" / "build"
    cache = _get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "glovebox" / "build"


def zig_cache_dir(home: PathLike | None = None) -> Path:
    """Where Zig keeps what it compiles for C builds (its libc, its objects): ``zig`` beside
    :func:`build_cache_dir` (``HOME/cache/zig``, else ``~/.cache/glovebox/zig``), unless
    ``ZIG_GLOBAL_CACHE_DIR`` names a directory of its own."""
    return Path(_get("ZIG_GLOBAL_CACHE_DIR") or build_cache_dir(home).parent / "zig")


def cargo_home_dir(home: PathLike | None = None) -> Path:
    """Where cargo keeps the crates Rust builds download (its registry cache): ``cargo`` beside
    :func:`build_cache_dir`, unless ``CARGO_HOME`` names a directory of its own."""
    return Path(_get("CARGO_HOME") or build_cache_dir(home).parent / "cargo")


def cargo_target_dir(home: PathLike | None = None) -> Path:
    """Where cargo compiles Rust builds (one folder per project below it): ``cargo-target`` beside
    :func:`build_cache_dir`, unless ``CARGO_TARGET_DIR`` names a directory of its own."""
    return Path(_get("CARGO_TARGET_DIR") or build_cache_dir(home).parent / "cargo-target")


def go_cache_dirs(home: PathLike | None = None) -> tuple[Path, Path]:
    """Where Go builds keep compiled packages and downloaded modules: ``go/build`` and ``go/mod``
    beside :func:`build_cache_dir`, unless ``GOCACHE`` and ``GOMODCACHE`` name directories of their own."""
    base = build_cache_dir(home).parent / "go"
    return Path(_get("GOCACHE") or base / "build"), Path(_get("GOMODCACHE") or base / "mod")


def toolchain_cache_dir() -> Path:
    """Where compiled guest toolchains are kept (QuickJS-NG, esbuild): per user and version, not per home.

    ``GLOVEBOX_TOOLCHAINS`` when set, else ``$XDG_CACHE_HOME/glovebox/toolchains``,
    else ``~/.cache/glovebox/toolchains``.
    """
    explicit = _get("GLOVEBOX_TOOLCHAINS")
    if explicit is not None:
        return Path(explicit)
    cache = _get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "glovebox" / "toolchains"


def policy_file() -> Path | None:
    """The policy file named by ``GLOVEBOX_POLICY``, or None."""
    value = _get("GLOVEBOX_POLICY")
    return Path(value) if value else None


def grants_file() -> Path | None:
    """The grants file named by ``GLOVEBOX_GRANTS``, or None."""
    value = _get("GLOVEBOX_GRANTS")
    return Path(value) if value else None


def require_signatures() -> bool:
    """Whether ``GLOVEBOX_REQUIRE_SIGNATURES`` is on (``1``, ``true``, ``yes`` or ``on``)."""
    return (_get("GLOVEBOX_REQUIRE_SIGNATURES") or "").strip().lower() in ("1", "true", "yes", "on")


#: The values ``GLOVEBOX_LOG_FORMAT`` (and ``glovebox --log-format``) take.
LOG_FORMATS = ("text", "json")


def secrets_key_ref() -> str | None:
    """``GLOVEBOX_SECRETS_KEY``: the secret reference the encrypted store's key is read through, or None."""
    return _get("GLOVEBOX_SECRETS_KEY")


def log_format() -> str:
    """``GLOVEBOX_LOG_FORMAT`` (``text`` or ``json``, any case), else ``text``.

    Raises:
        ValueError: the variable holds anything else (the message names it and the value).
    """
    value = (_get("GLOVEBOX_LOG_FORMAT") or "text").strip().lower()
    if value not in LOG_FORMATS:
        raise ValueError(f"GLOVEBOX_LOG_FORMAT must be text or json, not {value!r}")
    return value


def process_environment() -> dict[str, str]:
    """The environment of a helper process the host starts (the audit's fold process): the host's own."""
    return dict(os.environ)


def quiet_ray_failure_handler() -> None:
    """Set ``RAY_DISABLE_FAILURE_SIGNAL_HANDLER=1`` unless set: Ray's failure signal handler,
    installed by ``ray.init``, would take the signals wasmtime turns into guest traps."""
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")


def docker_config_file() -> Path:
    """The docker ``config.json`` OCI logins are read from: ``GLOVEBOX_OCI_CONFIG``, else
    ``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``."""
    explicit = _get("GLOVEBOX_OCI_CONFIG")
    if explicit is not None:
        return Path(explicit)
    directory = _get("DOCKER_CONFIG")
    return (Path(directory) if directory else Path.home() / ".docker") / "config.json"


def oci_login() -> dict[str, str | None]:
    """The OCI registry login of the environment: ``username``, ``password``, ``password_file`` and
    ``host`` (``GLOVEBOX_OCI_USERNAME``, ``_PASSWORD``, ``_PASSWORD_FILE``, ``_HOST``)."""
    return {
        "username": _get("GLOVEBOX_OCI_USERNAME"),
        "password": os.environ.get("GLOVEBOX_OCI_PASSWORD"),  # an empty password is a password
        "password_file": _get("GLOVEBOX_OCI_PASSWORD_FILE"),
        "host": _get("GLOVEBOX_OCI_HOST"),
    }


def native_enabled() -> bool:
    """``GLOVEBOX_NATIVE``: False when it is ``0`` (every call takes the pure-Python path), else True."""
    return (_get("GLOVEBOX_NATIVE") or "").strip() != "0"


def compile_timeout_s() -> float | None:
    """``GLOVEBOX_COMPILE_TIMEOUT_S``: the seconds one artifact may take to compile, else None (scaled by size).

    Raises:
        ValueError: the variable is not a positive number (the message names it and the value).
    """
    value = _get("GLOVEBOX_COMPILE_TIMEOUT_S")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"GLOVEBOX_COMPILE_TIMEOUT_S must be a positive number of seconds, not {value!r}")
    return seconds
