"""cuda.core.graph's names, as cuabi has them: `from cuabi.graph import
GraphBuilder, GraphCompleteOptions, GraphDebugPrintOptions` (a cuda.core
program changes only its import). As in cuda.core, graph.Graph is the executable (cuabi's GraphExec)
and graph.GraphDefinition the graph being built (cuabi's top-level Graph)."""
from ._graph import CompleteOptions as GraphCompleteOptions
from ._graph import Graph as GraphDefinition
from ._graph import GraphBuilder, GraphDebugPrintOptions, GraphNode
from ._graph import GraphExec as Graph
# cuda.core 1.2's explicit-graph names (issue 24): the condition, the node
# classes GraphDefinition's builders return, the pred / succ set view.
from ._graph_def import (AdjacencySetProxy, AllocNode, ChildGraphNode, ConditionalNode,
                         EmptyNode, EventRecordNode, EventWaitNode, FreeNode, GraphCondition,
                         HostCallbackNode, IfElseNode, IfNode, KernelNode, MemcpyNode,
                         MemsetNode, SwitchNode, WhileNode)

__all__ = ["Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions",
           "GraphDefinition", "GraphNode", "GraphCondition", "AllocNode", "ChildGraphNode",
           "ConditionalNode", "EmptyNode", "EventRecordNode", "EventWaitNode", "FreeNode",
           "HostCallbackNode", "IfElseNode", "IfNode", "KernelNode", "MemcpyNode", "MemsetNode",
           "SwitchNode", "WhileNode"]
