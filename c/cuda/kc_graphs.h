/* kc_graphs.h — kernels launched from CUDA graphs, for the CUDA capture library (c/cuda/kc_graphs.c).
 *
 * Kernel nodes never pass the launch callbacks: a graph runs through cuGraphLaunch. So at each
 * successful cuGraphInstantiate* the executable graph's kernel nodes are listed (recursing into
 * child-graph nodes; cuGraphGetNodes order: creation order, which for a stream-captured graph is
 * the order its launches were issued in), and each cuGraphLaunch counts one execution of each
 * enabled one. In capture mode a clone of the graph is kept and kept current: per-node kernel
 * updates (cuGraphExecKernelNodeSetParams, cuGraphExecNodeSetParams) as packed copies, memcpy /
 * memset / child-graph node updates mirrored onto the clone, cuGraphExecUpdate by cloning the
 * update's graph, cuGraphNodeSetEnabled as flags; a node selected by --dispatch, top-level or in
 * child graphs, is captured by kc_graph_capture (its comment says how); what it cannot capture is
 * reported by graph and node, never taken silently.
 * Threads: called with the library's mutex held.
 */
#ifndef KC_GRAPHS_H
#define KC_GRAPHS_H
#include <cuda.h>
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include "kc_vec.h"

/* A kernel node's parameters as set by cuGraphExecKernelNodeSetParams (packed like params.bin). */
typedef struct {
  CUDA_KERNEL_NODE_PARAMS p;
  char *packed;
  size_t size;
  void *ptrs[KC_MAX_PARAMS /* c/cuda/kc_state.h, which includes this file */]; /* p.kernelParams points here: into packed */
} kc_node_update_t;

/* One kernel node of an executable graph. */
typedef struct {
  char *name;       /* mangled */
  CUgraphNode orig; /* the instantiated graph's node (NULL inside child graphs) */
  size_t top;       /* index among the top-level nodes of itself or of the child-graph node holding it */
  char off;         /* disabled by cuGraphNodeSetEnabled (not executed, not counted) */
} kc_graph_kernel_t;

typedef struct {
  CUgraphExec exec;
  uint32_t id;
  uint64_t nodes, launches;
  KC_VEC(kc_graph_kernel_t) k; /* the kernel nodes, in node order (child graphs depth first) */
  /* capture mode, graphs holding a kernel that --kernel matches: */
  CUgraph clone;          /* cuGraphClone at instantiation, again at each cuGraphExecUpdate (the app may destroy its graph) */
  CUgraphNode *top_src;   /* the instantiated graph's top-level nodes (cuGraphGetNodes order) */
  CUgraphNode *top_clone; /* the same nodes in `clone` */
  char *top_off;          /* per top-level node: disabled by cuGraphNodeSetEnabled */
  size_t ntop;
  CUgraphNode *node;      /* per kernel node: the same node in `clone` (NULL inside child graphs: found by walking) */
  kc_node_update_t **upd; /* per kernel node: the last cuGraphExecKernelNodeSetParams, or NULL */
  const char *stale;      /* why `clone` no longer is what the executable graph runs (an update kerncap could not mirror), or NULL */
} kc_graph_t;

typedef struct {
  KC_VEC(kc_graph_t) list;
  uint32_t next_id;
  /* the --dispatch target fell inside a graph launch */
  int target_in_graph;
  uint32_t target_graph;
  uint64_t target_node;
  char target_name[512];
  char target_why[512]; /* why that launch could not be captured */
} kc_graphs_t;

typedef struct { CUgraphExec *phGraphExec; CUgraph hGraph; } kc_instantiate_params; /* every cuGraphInstantiate* variant starts so */
typedef struct { CUgraphExec hGraphExec; CUgraph hGraph; } kc_exec_update_params;  /* cuGraphExecUpdate (v1 and _v2) starts so */
typedef struct { CUgraphExec hGraphExec; CUgraphNode hNode; } kc_exec_node_params;  /* every cuGraphExec*NodeSetParams starts so */

/* Driver API callbacks (c/cuda/kerncap_cuda.c KC_DRIVER_CALLBACKS). kc_on_graph: cuGraphLaunch at entry
 * counts one execution of each enabled kernel node (and may capture one: kc_graph_capture);
 * cuGraphInstantiate* at a successful exit lists the executable graph's kernel nodes. */
void kc_on_graph(CUpti_CallbackId cbid, const CUpti_CallbackData *cb);
/* Updates of an executable graph in place, followed at API exit when they succeeded (cuGraphExecUpdate
 * and cuGraphNodeSetEnabled in both modes; a node's new parameters only in `run`: KC_CAPTURE_CALLBACKS). */
void kc_on_graph_node_update(CUpti_CallbackId cbid, const CUpti_CallbackData *cb);
#endif
