"""Arithmetic expressions over a case's parameters, as declared kernel specs write them.

``"top_k*M"``, ``"ceil_div(M, 64)"``, ``"T*top_k + 64*E"``, ``"T >= moe_tc_min_t"``: Python syntax,
evaluated over a whitelist of node types, names from the case and the spec's ``let:`` values, and a few
functions. Nothing else is reachable (no attributes, subscripts, comprehensions or lambdas), and integer
results are bounded so a typo cannot allocate the machine away.
"""

from __future__ import annotations

import ast
import math
import operator

import numpy as np

MAX_LENGTH = 400
MAX_MAGNITUDE = 2**64

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _ceil_div(a, b):
    return -(-a // b)


def _round_up(a, b):
    return _ceil_div(a, b) * b


def _f32_bits(x):
    """The bit pattern of ``x`` as an f32, for u32 push fields that carry a float (the engine's ``*_bits``)."""
    return int(np.array(x, np.float32).view(np.uint32))


FUNCTIONS = {
    "ceil_div": _ceil_div,
    "round_up": _round_up,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "log2": math.log2,
    "f32_bits": _f32_bits,
}


class ExpressionError(ValueError):
    """An expression that does not parse or evaluate; the message says why in a few words."""


def _parse(text) -> ast.AST | None:
    """The expression's tree, or None for a plain number."""
    if isinstance(text, bool) or isinstance(text, (int, float)):
        return None
    if not isinstance(text, str):
        raise ExpressionError(f"expected an expression or a number, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"longer than {MAX_LENGTH} characters")
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"does not parse ({exc.msg})") from None


def evaluate(text, names: dict):
    """The value of ``text`` (a number passes through) with ``names`` bound."""
    tree = _parse(text)
    return text if tree is None else _eval(tree.body, names)


_SYNTAX = (
    ast.Expression,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Tuple,
    ast.List,
    ast.Call,
    ast.And,
    ast.Or,
    *_BINARY,
    *_UNARY,
    *_COMPARE,
)


def check_syntax(text) -> None:
    """Refuse, before any case exists, an expression that could never evaluate (a parse error, an
    attribute, a subscript, a keyword argument ...); names and functions are checked per case."""
    tree = _parse(text)
    if tree is None:
        return
    for node in ast.walk(tree):
        if not isinstance(node, _SYNTAX) or (
            isinstance(node, ast.Call) and (node.keywords or not isinstance(node.func, ast.Name))
        ):
            raise ExpressionError(f"unsupported syntax {type(node).__name__}")


def _checked(value):
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= MAX_MAGNITUDE:
        raise ExpressionError("value out of range (|x| >= 2^64)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError("value is not finite")
    return value


def _eval(node, names):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise ExpressionError(f"unknown name {node.id!r} (known: {', '.join(sorted(names))})")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, names), _eval(node.right, names)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 2**32):
            raise ExpressionError("exponent too large")
        if isinstance(node.op, (ast.LShift,)) and right > 64:
            raise ExpressionError("shift too large")
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ExpressionError("division by zero") from None
        except TypeError as exc:
            raise ExpressionError(str(exc)) from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand, names)))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, names) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _eval(node.left, names)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator, names)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, names) for e in node.elts)
    if isinstance(node, ast.IfExp):
        return _eval(node.body, names) if _eval(node.test, names) else _eval(node.orelse, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        # The case may offer functions of its own (e.g. T2's tiles(n): work tiles of width n over its routing).
        function = names[node.func.id] if callable(names.get(node.func.id)) else FUNCTIONS.get(node.func.id)
        if function is None:
            raise ExpressionError(f"unknown function {node.func.id!r} (known: {', '.join(sorted(FUNCTIONS))})")
        try:
            return _checked(function(*(_eval(a, names) for a in node.args)))
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            raise ExpressionError(f"{node.func.id}: {exc}") from None
    raise ExpressionError(f"unsupported syntax {type(node).__name__}")


def evaluate_int(text, names: dict, *, minimum: int = 0):
    """An expression that must give a whole number >= ``minimum`` (sizes, grid and block extents)."""
    value = evaluate(text, names)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExpressionError(f"must be a whole number, got {value!r}")
    if value < minimum:
        raise ExpressionError(f"must be >= {minimum}, got {value}")
    return value
