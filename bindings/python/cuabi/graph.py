"""cuda.core.graph's names, as cuabi has them: `from cuabi.graph import
GraphBuilder, GraphCompleteOptions, GraphDebugPrintOptions` (a cuda.core
program changes only its import). As in cuda.core, graph.Graph is the executable (cuabi's GraphExec)
and graph.GraphDefinition the graph being built (cuabi's top-level Graph)."""
from ._graph import CompleteOptions as GraphCompleteOptions
from ._graph import Graph as GraphDefinition
from ._graph import GraphBuilder, GraphDebugPrintOptions, GraphNode
from ._graph import GraphExec as Graph

__all__ = ["Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions",
           "GraphDefinition", "GraphNode"]
