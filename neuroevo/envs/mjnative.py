"""Stepping a chunk of MuJoCo envs in one C call, without the GIL.

``MujocoSims`` steps each env with four to eight Python calls (set ``ctrl``, ``mj_step``,
``mj_rnePostConstraint``, copy each field the task reads). Each holds the GIL between the
physics calls, so the worker threads and the driver queue for it: on HalfCheetah, whose
step is short, that Python is a fifth of the generation (experiments/bench/README.md).
``Stepper`` does the same calls, in the same order and on the same memory, from a small C
loop that ctypes runs with the GIL released: the results are the same bit for bit
(tests/integration/test_mujoco.py).

The loop is compiled on first use with the system C compiler (``$CC``, else ``cc``) into
``$XDG_CACHE_HOME/neuroevo`` (default ``~/.cache/neuroevo``), named by a hash of its source,
and calls ``mj_step`` and ``mj_rnePostConstraint`` through pointers from the ``libmujoco``
that the ``mujoco`` package loaded, so it needs no MuJoCo headers and no link step. Without a
compiler, or where that library is not found, ``Stepper.create`` returns None and the envs
step through the Python loop, as before, with one warning. ``NEUROEVO_NATIVE=0`` in the
environment chooses the Python loop too (``scripts/bench_peers.py --python-loop`` measures
the two side by side).

A fatal MuJoCo error (``mju_error``) inside the C loop ends the process instead of raising:
the bindings turn it into a C++ exception that cannot cross the C frames. The locomotion
tasks raise none (MuJoCo reports instability as a warning, not an error).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import os
import subprocess
import tempfile
import warnings

import numpy as np

SOURCE = r"""
#include <string.h>
typedef void (*mjfn)(const void *, void *);

/* For each env in envs: ctrl from its row of actions, nstep x mj_step, then post (may be
   null), then each field copied out to its buffer row: MujocoSims._run's calls. */
void step_envs(mjfn step, mjfn post, const void *model, void *const *datas,
               const long long *envs, long long n, int nstep, double *const *ctrl,
               const double *actions, int nu, int nfields, double *const *dst,
               double *const *src, const long long *len) {
  for (long long k = 0; k < n; k++) {
    long long i = envs[k];
    memcpy(ctrl[i], actions + i * nu, sizeof(double) * nu);
    for (int s = 0; s < nstep; s++) step(model, datas[i]);
    if (post) post(model, datas[i]);
    for (int f = 0; f < nfields; f++)
      memcpy(dst[i * nfields + f], src[i * nfields + f], sizeof(double) * len[f]);
  }
}
"""

_P, _I64 = ctypes.c_void_p, ctypes.c_longlong


def cache_dir() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "neuroevo")


def compile_loop(directory: str | None = None) -> str:
    """The compiled loop's path, compiling it first if the cache lacks it; raises OSError or
    ``subprocess.CalledProcessError`` where it cannot be built."""
    directory = directory or cache_dir()
    cc = os.environ.get("CC") or "cc"
    digest = hashlib.sha256((cc + "\0" + SOURCE).encode()).hexdigest()[:16]
    path = os.path.join(directory, f"mjstep-{digest}.so")
    if os.path.exists(path):
        return path
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        src, out = os.path.join(tmp, "mjstep.c"), os.path.join(tmp, "mjstep.so")
        with open(src, "w") as f:
            f.write(SOURCE)
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", out, src], check=True,
                       capture_output=True, timeout=120)
        os.replace(out, path)  # atomic: a concurrent build renames an equal file over it
    return path


def _libmujoco(mujoco) -> ctypes.CDLL:
    """The shared library the bindings loaded (the same instance: dlopen of its path)."""
    where = os.path.dirname(mujoco.__file__)
    found = sorted(glob.glob(os.path.join(where, "libmujoco.so*"))
                   + glob.glob(os.path.join(where, "libmujoco*.dylib")))
    if not found:
        raise OSError(f"no libmujoco in {where}")
    return ctypes.CDLL(found[0])


@functools.cache
def _functions() -> tuple[ctypes._CFuncPtr, int, int] | None:
    """``(step_envs, &mj_step, &mj_rnePostConstraint)``, or None with one warning."""
    import mujoco

    try:
        lib = ctypes.CDLL(compile_loop())
        mj = _libmujoco(mujoco)
    except (OSError, subprocess.SubprocessError) as e:
        warnings.warn(f"neuroevo: MuJoCo envs step through Python, which is slower ({e}); "
                      "install a C compiler (cc, or set CC) for the native loop", stacklevel=3)
        return None
    fn = lib.step_envs
    fn.argtypes = [_P, _P, _P, _P, _P, _I64, ctypes.c_int, _P, _P, ctypes.c_int, ctypes.c_int,
                   _P, _P, _P]
    fn.restype = None
    return (fn, ctypes.cast(mj.mj_step, _P).value,
            ctypes.cast(mj.mj_rnePostConstraint, _P).value)


def _addresses(arrays) -> np.ndarray:
    return np.array([a.ctypes.data for a in arrays], np.uint64)


class Stepper:
    """The C loop over fixed ``MjData``s and field buffers; ``run`` is thread-safe for
    disjoint env sets (each env's memory is its own).

    ``copies[i]`` are env ``i``'s ``(buffer row, MjData array)`` pairs in ``MujocoSims``'
    order; the addresses are read once (an ``MjData``'s arrays never move), and ``keep``
    holds every object they point into for as long as the stepper lives."""

    def __init__(self, functions, model, datas, copies, frame_skip: int, post: bool):
        self._fn, step, rne = functions
        self._step, self._post = step, rne if post else None
        self._model, self._skip, self._nu = model._address, frame_skip, model.nu
        self._keep = (model, datas, copies)
        for row in copies:
            for dst, src in row:
                if not (dst.flags.c_contiguous and src.flags.c_contiguous
                        and dst.dtype == src.dtype == np.float64 and dst.size == src.size):
                    raise ValueError("Stepper copies contiguous float64 arrays of equal size")
        self._datas = np.array([d._address for d in datas], np.uint64)
        self._ctrl = _addresses(d.ctrl for d in datas)
        self._dst = _addresses(dst for row in copies for dst, _ in row)
        self._src = _addresses(src for row in copies for _, src in row)
        self._len = np.array([dst.size for dst, _ in copies[0]], np.int64)

    @classmethod
    def create(cls, model, datas, copies, frame_skip: int, post: bool) -> Stepper | None:
        if os.environ.get("NEUROEVO_NATIVE", "1") == "0":
            return None
        functions = _functions()
        return None if functions is None else cls(functions, model, datas, copies,
                                                  frame_skip, post)

    def run(self, envs: np.ndarray, actions: np.ndarray) -> None:
        """Step ``envs`` with their rows of ``actions`` (``[N, nu]``), GIL released."""
        envs = np.ascontiguousarray(envs, dtype=np.int64)
        # ctrl is float64: the cast np.copyto makes in the Python loop, made here once
        actions = np.ascontiguousarray(actions, dtype=np.float64)
        self._fn(self._step, self._post, self._model, self._datas.ctypes.data, envs.ctypes.data,
                 len(envs), self._skip, self._ctrl.ctypes.data, actions.ctypes.data, self._nu,
                 len(self._len), self._dst.ctypes.data, self._src.ctypes.data,
                 self._len.ctypes.data)
