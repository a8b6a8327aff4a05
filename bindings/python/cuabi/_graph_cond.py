"""cuda.core's GraphBuilder.create_condition, if_then, if_else, switch,
while_loop and embed (docs/graphs.md, "Conditionals through GraphBuilder").

Imported by those methods the first time one runs, never by _graph's
import (the first stream capture pays for _graph's import only). Below
_graph in the layers (cuabi/README.md): _graph passes its classes in.

Under the hood, as cuda.core: a GraphBuilder captures into a graph cuabi
made (cuabi_graph_capture_begin_to_graph), so a conditional or child graph
node goes into that graph at the capture's current dependencies and later
work on the stream follows it (cuabi_graph_capture_add_conditional /
_add_child). Each body is captured by a builder of its own, on a stream of
its own, into the body graph (begin_building / end_building on it); the
body graphs belong to the conditional node, and the graph keeps alive what
their nodes use.
"""
from __future__ import annotations

import ctypes as C

from . import _capi
from ._core import Stream
from ._lib import call, lib
from .errors import U32_MAX, index_arg

_IF = _capi.CUABI_GRAPH_CONDITIONAL_IF
_WHILE = _capi.CUABI_GRAPH_CONDITIONAL_WHILE
_SWITCH = _capi.CUABI_GRAPH_CONDITIONAL_SWITCH


def _check_building(builder, what: str) -> None:
    if builder.is_closed:
        raise RuntimeError(f"{what}: the graph builder has been closed")
    if not builder.is_building:
        raise RuntimeError(f"{what}: the graph builder is not building (begin_building() "
                           "first; a builder whose building ended takes no more work)")


def _target(builder):
    """The Graph the builder's capture goes into: its own (a primary or a
    body builder), or for a forked builder the one it was split from."""
    b = builder._primary or builder
    g = b._body if b._body is not None else b._target
    if g is None:
        raise RuntimeError("the graph builder's capture is not one cuabi began into a graph")
    return g


def create_condition(builder, default_value, condition_cls):
    """GraphBuilder.create_condition: a condition_cls (GraphCondition)."""
    _check_building(builder, "create_condition")
    if default_value is None:
        value, flags = 0, 0
    else:
        value = index_arg(default_value, "create_condition: default_value", 0, U32_MAX)
        flags = _capi.CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT
    return condition_cls(call("cuabi_graph_capture_conditional_handle", builder.stream,
                               value, flags))


def add_conditional(builder, condition, kind: int, count: int, what: str,
                    condition_cls) -> tuple:
    """The body builders (of type(builder)) of a new conditional node, not
    yet building."""
    if not isinstance(condition, condition_cls):
        raise TypeError(f"{what}: the condition must be a GraphCondition (from "
                        f"GraphBuilder.create_condition()), not {type(condition).__name__}")
    _check_building(builder, what)
    parent = _target(builder)
    node = call("cuabi_graph_capture_add_conditional", builder.stream, int(condition), kind,
                count)
    bodies = []
    try:
        for i in range(count):
            bodies.append(parent._share_with(
                type(parent)._adopt_new(call("cuabi_graph_node_body", C.c_void_p(node), i))))
    except BaseException:
        for b in bodies:
            b.close()
        raise
    finally:
        # The bodies keep the graph (and so the node) alive; no node handle
        # is needed to capture into them.
        lib.cuabi_graph_node_release(C.c_void_p(node))
    builders = []
    device = builder.stream.device
    for b in bodies:
        gb = type(builder)(Stream(device), owns_stream=True)
        gb._body = b
        builders.append(gb)
    return tuple(builders)


def embed(builder, child, builder_cls) -> None:
    if not isinstance(child, builder_cls):
        raise TypeError(f"embed: the child must be a GraphBuilder, not {type(child).__name__}")
    if child.is_closed or child._graph is None:
        raise ValueError("embed: the child graph has not finished building (end_building())"
                         if not child.is_closed else "embed: the child graph builder is closed")
    if builder.is_closed or not builder.is_building:
        raise ValueError("embed: the parent graph is not being built")
    _target(builder)
    node = call("cuabi_graph_capture_add_child", builder.stream, child._graph)
    lib.cuabi_graph_node_release(C.c_void_p(node))
    # What the child's nodes use (host callbacks, raw operands) goes with it.
    _target(builder)._keep.append(child._graph)
