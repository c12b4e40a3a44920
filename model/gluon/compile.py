"""Compile a declared Gluon (or plain `tl`) launch to TTGIR on the CPU.

`GluonASTSource.make_ir` runs the kernel's Python code through Triton's code generator for an
explicit `GPUTarget`, so no driver or GPU is needed; the backend's `gluon_to_ttgir` then inlines
the partition functions and folds constants, as `triton.compile` does before lowering to LLVM.
A plain `@triton.jit` kernel goes through `make_ttir` and `make_ttgir` instead, so the barriers
its automatic warp specialization (`tl.range(..., warp_specialize=True)`) generates are checked
like hand-written ones.
"""

from __future__ import annotations

import atexit
import contextlib
import difflib
import faulthandler
import inspect
import os
import pickle
import re
import signal
import sys
import tempfile
import warnings
from typing import Any, Callable

from ..ir import ModelError
from .launch import Launch, TensorDesc

SUPPORTED = ((3, 9), (3, 10))       # [lowest, first unsupported)


def _triton():
    try:
        import triton
    except ModuleNotFoundError:
        raise ModelError("checking a Gluon kernel needs Triton",
                         hint="install the Gluon extra: pip install 'barrierproof[gluon]'") from None
    _quiet_teardown()
    version = tuple(int(x) for x in re.findall(r"\d+", triton.__version__)[:2])
    if not SUPPORTED[0] <= version < SUPPORTED[1]:
        raise ModelError(f"triton {triton.__version__} is not a tested version",
                         hint="install triton>=3.9,<3.10 (pip install 'barrierproof[gluon]')")
    return triton


_QUIET = []


def _quiet_teardown() -> None:
    """Triton's nanobind bindings list the objects still alive when the interpreter exits
    ("nanobind: leaked N instances!") on the stderr of every process that compiled a kernel:
    noise after a report. Once everything else has run at exit, stderr is closed to it."""
    if _QUIET:
        return
    _QUIET.append(True)

    def silence():
        try:
            sys.stderr.flush()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
        except (OSError, ValueError):
            pass
    atexit.register(silence)


def _target(spec: str):
    from triton.backends.compiler import GPUTarget
    m = re.fullmatch(r"cuda:(\d+)", spec)
    if not m or not 70 <= int(m.group(1)) < 130:
        what = "not a CUDA target" if not m else "not a compute capability Triton compiles for"
        raise ModelError(f"target {spec!r} is {what}",
                         hint="give target='cuda:100' (Blackwell) or 'cuda:90' (Hopper)")
    return GPUTarget("cuda", int(m.group(1)), 32)


# TTGIR ops the hardware has only on some compute capabilities, [low, high): Triton stops at
# them only when it lowers to PTX, after the TTGIR the frontend reads
_ARCH = (("ttng.async_tma_", 90, 1000, "TMA"), ("ttng.barrier_expect", 90, 1000, "mbarrier expect_tx"),
         ("ttng.warp_group_dot", 90, 100, "wgmma (Hopper only)"),
         ("ttng.tc_gen5_", 100, 120, "tcgen05"), ("ttng.tmem_", 100, 120, "tensor memory"),
         ("ttng.clc_", 100, 1000, "cluster launch control"))


def arch_error(op_name: str, target: str) -> str | None:
    """Why `op_name` does not exist on the launch's target (None: it does)."""
    cc = int(target.partition(":")[2])
    for prefix, low, high, what in _ARCH:
        if op_name.startswith(prefix) and not low <= cc < high:
            return f"{what} ({op_name}) does not exist on cuda:{cc}"
    return None


def _desc_type(desc: TensorDesc, gluon: bool) -> str:
    shape = ", ".join(map(str, desc.block_shape))
    if not gluon:                        # a `tl` kernel: the compiler picks the layout
        return f"tensordesc<{desc.dtype}[{shape}]>"
    from triton.experimental.gluon import language as gl
    dtype = {"fp16": gl.float16, "bf16": gl.bfloat16, "fp32": gl.float32, "fp8e4nv": gl.float8e4nv,
             "fp8e5": gl.float8e5, "i8": gl.int8, "i16": gl.int16, "i32": gl.int32,
             "i64": gl.int64, "u8": gl.uint8, "fp64": gl.float64}.get(desc.dtype)
    if dtype is None:
        raise ModelError(f"tensor_desc element type {desc.dtype!r} cannot be compiled")
    layout = desc.layout or gl.NVMMASharedLayout.get_default_for(list(desc.block_shape), dtype)
    return f"tensordesc<{desc.dtype}[{shape}],{layout!r}>"


def signature(launch: Launch, gluon: bool = True) -> tuple[dict, dict]:
    """Triton's signature (argument name -> type) and the constexpr values of the launch."""
    fn = launch.kernel
    params = ", ".join(p.name for p in fn.params)
    sig, constexprs = {}, {}
    given = launch.args.get("num_warps", launch.num_warps)
    if given != launch.num_warps:
        raise ModelError(f"num_warps is given twice: {given!r} in args and {launch.num_warps} "
                         "as Launch(num_warps=...), which the compiler uses",
                         hint=f"give it once: Launch(..., num_warps={given!r})")
    # a misspelt name first: it is why a parameter then has no value
    names = [p.name for p in fn.params]
    unknown = sorted(set(launch.args) - set(names) - {"num_warps"})
    if unknown:
        close = {u: difflib.get_close_matches(u, names, n=1) for u in unknown}
        said = ", ".join(f"{u!r}" + (f" (did you mean {c[0]!r}?)" if c else "")
                         for u, c in close.items())
        raise ModelError(f"{fn.__name__} has no argument {said}",
                         hint=f"its arguments: {fn.__name__}({params})")
    for p in fn.params:
        name = p.name
        if p.is_constexpr:
            if name in launch.args:
                constexprs[name] = launch.args[name]
            elif name == "num_warps":
                constexprs[name] = launch.num_warps
            elif p._param.default is not inspect.Parameter.empty:
                constexprs[name] = p._param.default
            else:
                raise ModelError(f"constexpr argument {name!r} of {fn.__name__} has no value",
                                 hint=f"give it in Launch(args={{{name!r}: ...}})")
            sig[name] = "constexpr"
            continue
        if name not in launch.args:
            raise ModelError(f"argument {name!r} of {fn.__name__} has no value",
                             hint=f"give every runtime argument of {fn.__name__}({params}) in "
                                  "Launch(args=...): tensor_desc(...) for descriptors, ints for "
                                  "scalars")
        value = launch.args[name]
        if isinstance(value, TensorDesc):
            sig[name] = _desc_type(value, gluon)
        elif isinstance(value, bool):
            sig[name] = "i1"
        elif isinstance(value, int):
            sig[name] = "i32" if -2**31 <= value < 2**31 else "i64"
        elif isinstance(value, str):
            sig[name] = value                       # an explicit Triton type, e.g. "*fp16"
        else:
            raise ModelError(f"argument {name!r} = {value!r} cannot be given to the compiler",
                             hint="use tensor_desc(dtype, block_shape), an int or a type string")
    return sig, constexprs


def to_ttgir(launch: Launch) -> str:
    """The kernel's TTGIR as printed with its locations."""
    _triton()
    from triton._C.libtriton import ir
    from triton.compiler.compiler import make_backend
    from triton.compiler.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
    from triton.runtime.jit import JITFunction
    gluon = isinstance(launch.kernel, GluonJITFunction)
    if not isinstance(launch.kernel, JITFunction):
        what = getattr(launch.kernel, "__name__", None) or repr(launch.kernel)
        raise ModelError(f"{what} is not a @gluon.jit kernel",
                         hint="decorate it with triton.experimental.gluon.jit (or triton.jit)")
    for what, n, top in (("num_warps", launch.num_warps, 32), ("num_ctas", launch.num_ctas, 16)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n & (n - 1) or n > top:
            raise ModelError(f"Launch({what}={n!r}) is not a power of two from 1 to {top}",
                             hint=f"e.g. Launch(..., {what}={4 if what == 'num_warps' else 1})")
    target = _target(launch.target)
    backend = make_backend(target)
    with warnings.catch_warnings():
        # the default of floating-point fusion changes in Triton 3.10; the barriers do not
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
        options = backend.parse_options({"num_warps": launch.num_warps,
                                         "num_ctas": launch.num_ctas,
                                         "num_stages": launch.num_stages})
    sig, constexprs = signature(launch, gluon)
    src = (GluonASTSource if gluon else ASTSource)(launch.kernel, sig, constexprs)

    def build(sink) -> str:
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        return _generate(src, target, options, backend, context, launch, gluon, sink)
    return _contained(build, launch)


def _generate(src, target, options, backend, context, launch: Launch, gluon: bool, sink) -> str:
    with _diagnostics(sink) as said:
        try:
            module = src.make_ir(target, options, backend.get_codegen_implementation(options),
                                 backend.get_module_map(), context)
        except Exception as err:     # Triton's code generator: the kernel does not compile
            raise _diagnosed(said(), launch) or _compile_error(err, launch) from None
        try:
            if gluon:
                module = backend.gluon_to_ttgir(module, {}, options, target.arch)
            else:    # a `tl` kernel: Triton's own pipeline, warp specialization included
                metadata: dict = {}
                module = backend.make_ttir(module, metadata, options, target.arch)
                module = backend.make_ttgir(module, metadata, options, target.arch)
        except RuntimeError as err:       # a pass failed on the user's kernel
            raise _diagnosed(said(), launch) or ModelError(
                f"Triton's compiler failed on {launch.kernel.__name__}: {err}",
                hint="the kernel must compile for the target") from None
    return module.str()


def _contained(build: Callable[[Any], str], launch: Launch) -> str:
    """Some errors in Triton's C++ passes end the process (`LLVM ERROR: ...`, then abort): the
    compilation runs in a fork of this process, whose end is then an input error saying what
    it printed, not the end of the checker."""
    if not hasattr(os, "fork"):
        return build(None)
    with tempfile.TemporaryFile(mode="w+b") as said, tempfile.TemporaryFile(mode="w+b") as reply:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:        # the copy: compile, send back the TTGIR or the error, end at once
            # Its abort is reported by the parent, from what it printed: no second report of
            # it from a fault handler the parent enabled (pytest's, a user's).
            faulthandler.disable()
            try:
                try:
                    answer: tuple = ("ttgir", build(said))
                except ModelError as err:
                    answer = ("error", (err.message, err.loc, err.hint, err.code))
                except BaseException as err:
                    answer = ("raised", f"{type(err).__name__}: {err}")
                pickle.dump(answer, reply)
                reply.flush()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        reply.seek(0)
        try:
            kind, value = pickle.load(reply)
        except Exception:     # it ended before answering
            kind, value = None, None
        if kind == "ttgir":
            return value
        if kind == "error":
            message, loc, hint, code = value
            raise ModelError(message, loc=loc, hint=hint, code=code)
        name = getattr(launch.kernel, "__name__", "the kernel")
        if kind == "raised":
            raise ModelError(f"compiling {name}: {value}")
        said.seek(0)
        printed = said.read().decode("utf-8", "replace")
        how = (f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
               if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}")
        raise _diagnosed(printed, launch) or ModelError(
            f"Triton's compiler stopped on {name} ({how}): {_fatal(printed)}",
            hint=f"fix the kernel or its Launch (num_ctas={launch.num_ctas}, "
                 f"target={launch.target}; for several CTAs, layouts with a cga_layout) so "
                 "that triton compiles it")


def _fatal(printed: str) -> str:
    """LLVM's fatal error as it printed it, up to its stack dump."""
    lines = printed.splitlines()
    start = next((k for k, line in enumerate(lines) if "LLVM ERROR:" in line), None)
    if start is None:
        return "it printed no error"
    said = [lines[start].split("LLVM ERROR:", 1)[1]]
    for line in lines[start + 1:start + 8]:
        if not line.strip() or re.match(r"^(Stack dump|PLEASE|\s*#\d|\d+\.\s)", line):
            break
        said.append(line)
    return " ".join(part.strip() for part in said if part.strip())


@contextlib.contextmanager
def _diagnostics(sink=None):
    """MLIR prints a failed verification (`file:line:col: error: ...`) on the process's stderr
    and raises a bare RuntimeError; what it printed is captured (in `sink`, when given, for a
    caller to read should the process end), for the error to say, and passed on when nothing
    failed."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield lambda: ""
        return
    own = sink is None
    with (tempfile.TemporaryFile(mode="w+b") if own else contextlib.nullcontext(sink)) as sink:
        os.dup2(sink.fileno(), 2)
        text: list[str] = []

        def said() -> str:
            if not text:
                sys.stderr.flush()
                sink.seek(0)
                text.append(sink.read().decode("utf-8", "replace"))
            return text[0]
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            rest = said()
            failed = sys.exc_info()[0] is not None
            if rest and not failed:
                sys.stderr.write(rest)


def _diagnosed(text: str, launch: Launch) -> ModelError | None:
    """The first MLIR error in `text`, at its line of the kernel's source: the message runs
    to the echo of the source line, which the caret line under it marks."""
    from ..ir import Loc
    lines = text.splitlines()
    for k, line in enumerate(lines):
        m = re.match(r"^(.+?):(\d+):\d+: error: (.*)$", line)
        if not m:
            continue
        message = [m.group(3)]
        caret = next((j for j in range(k + 1, len(lines)) if re.match(r"^\s*\^\s*$", lines[j])),
                     None)
        if caret is not None:
            message += lines[k + 1:caret - 1]
        text = " ".join(part.strip() for part in message if part.strip())
        return ModelError(f"the Gluon kernel does not compile for its launch: {text}",
                          loc=Loc(m.group(1), int(m.group(2))),
                          hint=f"fix the kernel or its Launch (num_ctas={launch.num_ctas}, "
                               f"target={launch.target}) so that triton compiles it")
    return None


def _compile_error(err: BaseException, launch: Launch) -> ModelError:
    """Triton's CompilationError, innermost, as one line at the kernel's source line."""
    from triton.compiler.errors import CompilationError
    from ..ir import Loc
    inner = err
    while isinstance(inner.__cause__, CompilationError):
        inner = inner.__cause__
    if not isinstance(inner, CompilationError):
        return ModelError(f"compiling {launch.kernel.__name__}: {type(err).__name__}: {err}")
    text = inner.error_message or str(inner.__cause__ or "does not compile")
    fn = launch.kernel
    for obj in list(vars(inspect.getmodule(fn.fn) or fn).values()):    # the failing function
        if getattr(obj, "src", None) == inner.src and hasattr(obj, "fn"):
            fn = obj
    loc = None
    try:
        file = inspect.getsourcefile(fn.fn)
        lines, start = inspect.getsourcelines(fn.fn)
        # the node's line counts from the `def`, the source lines from the decorator
        decorators = next(k for k, line in enumerate(lines) if line.lstrip().startswith("def "))
        if file and hasattr(inner.node, "lineno"):
            loc = Loc(file, start + decorators + inner.node.lineno - 1)
    except (OSError, TypeError):
        pass
    return ModelError(f"the Gluon kernel does not compile: {text.strip().splitlines()[-1]}",
                      loc=loc, hint="fix the kernel so that triton compiles it"
                                    + _odd_constexprs(launch))


def _odd_constexprs(launch: Launch) -> str:
    """The constexpr values of the launch that are neither numbers nor layouts nor types (a
    `"2"` for an int), a likely cause of a kernel that does not compile."""
    constexprs = {p.name for p in launch.kernel.params if p.is_constexpr}
    odd = [f"{name}={value!r}" for name, value in launch.args.items()
           if name in constexprs and isinstance(value, (str, float))]
    return f" (the launch gives {', '.join(odd)}: is that the type the kernel uses?)" \
        if odd else ""
