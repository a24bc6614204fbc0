"""A small, forgiving parser for the C prototypes that the fast path calls.

It finds ``extern "C"`` host functions (single declarations and ``extern "C" { ... }`` blocks) and
``__global__`` kernels in CUDA sources, and parses explicit signature strings. It does not preprocess:
functions produced by macros or hidden in ``#if 0`` are not seen (the build cross-checks the library's
exported symbols; pass ``signatures=`` for anything the parser cannot see). Malformed declarations are
skipped, never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that qualify a declaration without changing the C type the caller must pass.
_QUALIFIERS = {
    "static",
    "inline",
    "__inline__",
    "__forceinline__",
    "__noinline__",
    "__host__",
    "__device__",
    "__global__",
    "extern",
    "__restrict__",
    "__restrict",
    "restrict",
    "register",
    "volatile",
    "constexpr",
    "__launch_bounds__",
    "__grid_constant__",
    "noexcept",
    "struct",
    "enum",
    "class",
    "typename",
}
_BUILTIN_TYPE_WORDS = {
    "int",
    "char",
    "short",
    "long",
    "float",
    "double",
    "void",
    "bool",
    "signed",
    "unsigned",
}
_IDENT = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_ATTRIBUTE = re.compile(
    r"\b(?:__attribute__|__declspec|alignas|__align__|__launch_bounds__|__maxnreg__)\s*\("
)
_EXTERN_C = re.compile(r'\bextern\s*"C"')


@dataclass(frozen=True)
class Param:
    """One parameter: ``base`` is the type without qualifiers and pointers (e.g. ``float``, ``cudaStream_t``),
    ``pointer`` the number of ``*``/``[]``, ``reference`` whether it is a C++ reference."""

    name: str | None
    base: str
    pointer: int = 0
    const: bool = False
    reference: bool = False

    @property
    def ctype(self) -> str:
        text = ("const " if self.const else "") + self.base + " " + "*" * self.pointer
        return (text.strip() + (" &" if self.reference else "")).strip()


@dataclass(frozen=True)
class Prototype:
    name: str
    ret: str  # return type, normalised (e.g. "int", "cudaError_t", "void", "float *")
    params: tuple[Param, ...]
    kernel: bool = False  # a __global__ function
    variadic: bool = False
    line: int | None = None  # 1-based line in the parsed source

    def __str__(self) -> str:
        args = ", ".join(p.ctype + (f" {p.name}" if p.name else "") for p in self.params)
        if self.variadic:
            args += ", ..." if args else "..."
        return f"{'__global__ ' if self.kernel else ''}{self.ret} {self.name}({args})"


def strip_comments_and_strings(source: str, keep_preprocessor: bool = False) -> str:
    """Comments, string and character literals blanked to spaces (newlines and ``"C"`` kept, so line
    numbers and ``extern "C"`` survive); preprocessor directives blanked unless ``keep_preprocessor``."""
    out: list[str] = []
    i, n = 0, len(source)
    at_line_start = True
    while i < n:
        c = source[i]
        if c == "/" and source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in source[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            literal = source[i:j]
            out.append(literal if literal in ('"C"', '"C++"') else c + " " * max(len(literal) - 2, 0) + c)
            i = j
        elif c == "#" and at_line_start and not keep_preprocessor:
            j = i
            while j < n:  # a directive continues over backslash-newlines
                k = source.find("\n", j)
                if k < 0:
                    j = n
                    break
                if source[k - 1] == "\\":
                    j = k + 1
                    continue
                j = k
                break
            out.append("".join(ch if ch == "\n" else " " for ch in source[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
    return "".join(out)


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one at ``start`` (or -1)."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] == open_ch:
            depth += 1
        elif text[k] == close_ch:
            depth -= 1
            if depth == 0:
                return k
    return -1


def _strip_attributes(text: str) -> str:
    while m := _ATTRIBUTE.search(text):
        end = _matching(text, m.end() - 1, "(", ")")
        if end < 0:
            return text[: m.start()]
        text = text[: m.start()] + " " + text[end + 1 :]
    return text


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _parse_type(text: str, has_name: bool) -> tuple[str, int, bool, bool, str | None] | None:
    """(base, pointer depth, const, reference, name) of ``const float* __restrict__ x`` and the like."""
    text = _strip_attributes(text)
    pointer = 0
    # Arrays decay to pointers: "float x[]" / "float x[16]".
    while m := re.search(r"\[[^\[\]]*\]\s*$", text):
        pointer += 1
        text = text[: m.start()]
    tokens = re.findall(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*(?:\s*<[^<>]*>)?|\*|&", text)
    rest = re.sub(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*(?:\s*<[^<>]*>)?|\*|&|\s", "", text)
    if rest:  # stray punctuation: function pointers, default arguments we cannot read, ...
        return None
    const = "const" in tokens
    reference = "&" in tokens
    pointer += tokens.count("*")
    words = [t for t in tokens if t not in ("*", "&", "const") and t not in _QUALIFIERS]
    if not words:
        return None
    name = None
    if has_name and len(words) > 1 and words[-1] not in _BUILTIN_TYPE_WORDS:
        name = words.pop()
    base = " ".join(re.sub(r"\s+", "", w) if "::" in w or "<" in w else w for w in words)
    base = _normalise_builtin(base)
    return base, pointer, const, reference, name


def _normalise_builtin(base: str) -> str:
    words = base.split()
    if not words or not set(words) <= _BUILTIN_TYPE_WORDS:
        return base
    if words == ["unsigned"] or words == ["signed"]:
        words.append("int")
    if "int" in words and len(words) > 1 and ("long" in words or "short" in words):
        words.remove("int")  # "long int" -> "long", "unsigned short int" -> "unsigned short"
    if words[0] == "signed" and words[1:] != ["char"]:
        words = words[1:]
    return " ".join(words)


def parse_params(text: str) -> tuple[tuple[Param, ...], bool] | None:
    """Parameters of a parameter-list text (without the parentheses); None when unreadable."""
    text = text.strip()
    if text in ("", "void"):
        return (), False
    params, variadic = [], False
    for part in _split_top(text):
        part = part.strip()
        if part == "...":
            variadic = True
            continue
        if "=" in part:  # C++ default argument
            part = part.split("=", 1)[0]
        parsed = _parse_type(part, has_name=True)
        if parsed is None:
            return None
        base, pointer, const, reference, name = parsed
        params.append(Param(name=name, base=base, pointer=pointer, const=const, reference=reference))
    return tuple(params), variadic


def _parse_declaration(text: str, line: int | None) -> Prototype | None:
    """``ret name(params)`` (text up to the body or the semicolon) -> Prototype, or None."""
    text = _strip_attributes(text)
    if re.search(r"\btypedef\b|\busing\b|\btemplate\b|\boperator\b", text):
        return None
    kernel = bool(re.search(r"\b__global__\b", text))
    open_paren = text.find("(")
    if open_paren < 0:
        return None
    close = _matching(text, open_paren, "(", ")")
    if close < 0 or text[close + 1 :].strip() not in ("", "const", "noexcept"):
        return None
    head = text[:open_paren].rstrip()
    m = re.search(r"([A-Za-z_]\w*)$", head)
    if not m:
        return None
    name = m.group(1)
    ret = _parse_type(head[: m.start()], has_name=False)
    if ret is None:
        return None
    base, pointer, const, reference, _ = ret
    ret_text = (("const " if const else "") + base + (" " + "*" * pointer if pointer else "")).strip()
    params = parse_params(text[open_paren + 1 : close])
    if params is None or reference:
        return None
    return Prototype(name=name, ret=ret_text, params=params[0], kernel=kernel, variadic=params[1], line=line)


def _declarations(text: str, start: int, end: int):
    """(text, offset) of each top-level declaration in text[start:end] (bodies and initialisers skipped)."""
    i = start
    decl_start = start
    while i < end:
        ch = text[i]
        if ch == "{":
            close = _matching(text, i, "{", "}")
            close = end if close < 0 or close > end else close
            yield text[decl_start:i], decl_start
            i = decl_start = close + 1
            continue
        if ch == ";":
            yield text[decl_start:i], decl_start
            decl_start = i + 1
        i += 1
    if text[decl_start:end].strip():
        yield text[decl_start:end], decl_start


def _line_of(text: str, offset: int) -> int:
    stripped = len(text[offset:]) - len(text[offset:].lstrip())
    return text.count("\n", 0, offset + stripped) + 1


def parse_extern_c(source: str) -> list[Prototype]:
    """Host functions declared or defined inside ``extern "C"`` (kernels excluded), first occurrence wins."""
    text = strip_comments_and_strings(source)
    found: dict[str, Prototype] = {}
    for m in _EXTERN_C.finditer(text):
        i = m.end()
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            close = _matching(text, i, "{", "}")
            decls = _declarations(text, i + 1, close if close > 0 else len(text))
        else:
            decls = [next(_declarations(text, i, len(text)), ("", i))]
        for decl, offset in decls:
            proto = _parse_declaration(decl, _line_of(text, offset))
            if proto is not None and not proto.kernel:
                found.setdefault(proto.name, proto)
    return list(found.values())


_ATTRIBUTE_WORDS = ("__launch_bounds__", "__attribute__", "__maxnreg__", "__cluster_dims__", "__declspec")


def _parameter_list(text: str, start: int) -> tuple[int, int]:
    """(open, close) of the first parenthesis group after ``start`` that is not an attribute's."""
    i = start
    while (paren := text.find("(", i)) >= 0:
        close = _matching(text, paren, "(", ")")
        if close < 0:
            return -1, -1
        if not text[:paren].rstrip().endswith(_ATTRIBUTE_WORDS):
            return paren, close
        i = close + 1
    return -1, -1


def parse_kernels(source: str) -> list[Prototype]:
    """``__global__`` functions of a source (templates included, their parameters as written)."""
    text = strip_comments_and_strings(source)
    out = []
    for m in re.finditer(r"\b__global__\b", text):
        # The declaration starts after the previous ';', '}' or '{' (or a template<...> header).
        begin = max(
            text.rfind(";", 0, m.start()), text.rfind("}", 0, m.start()), text.rfind("{", 0, m.start())
        )
        head = text[begin + 1 : m.start()]
        tmpl = re.search(r"\btemplate\s*<", head)
        if tmpl:
            close = _matching(head, tmpl.end() - 1, "<", ">")
            begin += 1 + close if close >= 0 else 0
        paren, close = _parameter_list(text, m.end())
        if paren < 0:
            continue
        decl = text[begin + 1 : close + 1].replace('extern "C"', " ")
        proto = _parse_declaration(decl, _line_of(text, m.start()))
        if proto is not None:
            out.append(proto)
    return out


def parse_signature(signature: str) -> Prototype:
    """An explicit signature such as ``"int relu(const float* x, float* y, int n, cudaStream_t s)"``."""
    text = signature.strip().rstrip(";")
    text = _EXTERN_C.sub(" ", strip_comments_and_strings(text))
    proto = _parse_declaration(text, None)
    if proto is None:
        raise ValueError(f"cannot parse the C signature {signature!r}")
    return proto
