/* cuabi._fast: graph capture and instantiate (cuabi._graph's calls made for
 * every graph a program captures), above fast_common.c. */
#ifndef CUABI_FAST_GRAPH_H
#define CUABI_FAST_GRAPH_H

#include "fast_common.h"

/* Add graph_capture_begin, graph_capture_begin_to_graph, graph_capture_end,
 * graph_create and graph_instantiate to the module. */
int fast_graph_init(PyObject *module);

#endif
