/*
 * kc_graphs.c — kernels launched from CUDA graphs (what is followed and how a node is captured:
 * c/cuda/kc_graphs.h). Exports nothing outside the library. Reads no environment variable. Called from
 * the CUPTI callback with kc.mu held, on the application thread of the graph API call.
 */
#define _GNU_SOURCE
#include "kc_state.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *kc_node_kernel_name(CUgraphNode node) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!kc.cu.cuGraphKernelNodeGetParams_v2 || kc.cu.cuGraphKernelNodeGetParams_v2(node, &p) != CUDA_SUCCESS) return NULL;
  const char *name = NULL;
  if (p.func && kc.cu.cuFuncGetName && kc.cu.cuFuncGetName(&name, p.func) == CUDA_SUCCESS && name) return name;
  if (p.kern && kc.cu.cuKernelGetName && kc.cu.cuKernelGetName(&name, p.kern) == CUDA_SUCCESS && name) return name;
  return NULL;
}

/* All nodes of a graph (cuGraphGetNodes order) in a calloc'd array; NULL when it has none or on error. */
static CUgraphNode *kc_graph_nodes(CUgraph graph, size_t *n) {
  *n = 0;
  if (!kc.cu.cuGraphGetNodes || kc.cu.cuGraphGetNodes(graph, NULL, n) != CUDA_SUCCESS || !*n) { *n = 0; return NULL; }
  CUgraphNode *nodes = calloc(*n, sizeof *nodes);
  if (nodes && kc.cu.cuGraphGetNodes(graph, nodes, n) == CUDA_SUCCESS) return nodes;
  free(nodes);
  *n = 0;
  return NULL;
}

/* List graph's kernel nodes into g, depth first through child-graph nodes; top: the top-level index they belong to. */
static void kc_graph_walk(kc_graph_t *g, CUgraph graph, int depth, size_t top) {
  size_t n = 0;
  CUgraphNode *nodes = depth > 16 ? NULL : kc_graph_nodes(graph, &n);
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType t;
    if (kc.cu.cuGraphNodeGetType(nodes[i], &t) != CUDA_SUCCESS) continue;
    g->nodes++;
    size_t ti = depth == 0 ? i : top;
    if (t == CU_GRAPH_NODE_TYPE_KERNEL) {
      const char *name = kc_node_kernel_name(nodes[i]);
      char *copy = strdup(name ? name : "(unknown graph kernel)");
      if (!copy || KC_VEC_PUSH(g->k, (kc_graph_kernel_t){copy, depth == 0 ? nodes[i] : NULL, ti, 0})) { free(copy); break; }
    } else if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child;
      if (kc.cu.cuGraphChildGraphNodeGetGraph && kc.cu.cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS) kc_graph_walk(g, child, depth + 1, ti);
    }
  }
  free(nodes);
}

static void kc_graph_free_upd(kc_graph_t *g) {
  for (size_t k = 0; g->upd && k < g->k.n; k++)
    if (g->upd[k]) { free(g->upd[k]->packed); free(g->upd[k]); g->upd[k] = NULL; }
}

static void kc_graph_free(kc_graph_t *g) {
  kc_graph_free_upd(g);
  for (size_t k = 0; k < g->k.n; k++) free(g->k.v[k].name);
  KC_VEC_FREE(g->k);
  free(g->node);
  free(g->upd);
  free(g->top_src);
  free(g->top_clone);
  free(g->top_off);
  if (g->clone && kc.cu.cuGraphDestroy) kc.cu.cuGraphDestroy(g->clone);
}

/* (Re)make g's clone from graph: the instantiated graph, or the graph of a cuGraphExecUpdate (whose
 * top-level nodes pair with the instantiated graph's in cuGraphGetNodes order: topologically
 * identical, both created in the same order). Capture mode only. */
static void kc_graph_reclone(kc_graph_t *g, CUgraph graph) {
  size_t n = 0;
  CUgraphNode *src = kc_graph_nodes(graph, &n);
  CUgraph cl = NULL;
  CUgraphNode *dst = n ? calloc(n, sizeof *dst) : NULL;
  if (!src || !dst || kc.cu.cuGraphClone(&cl, graph) != CUDA_SUCCESS) cl = NULL;
  for (size_t i = 0; cl && i < n; i++)
    if (kc.cu.cuGraphNodeFindInClone(&dst[i], src[i], cl) != CUDA_SUCCESS) dst[i] = NULL;
  if (g->clone) kc.cu.cuGraphDestroy(g->clone);
  free(g->top_clone);
  g->clone = cl;
  g->top_clone = dst;
  if (!g->top_src) {
    g->top_src = src;
    g->ntop = n;
    g->top_off = calloc(n ? n : 1, 1);
  } else {
    if (n != g->ntop) g->stale = "cuGraphExecUpdate gave a graph with another node count";
    free(src);
  }
  if (!cl) { g->stale = "the graph could not be copied"; return; }
  for (size_t k = 0; g->node && k < g->k.n; k++) g->node[k] = g->k.v[k].orig && g->k.v[k].top < n ? dst[g->k.v[k].top] : NULL;
}

/* Capture mode: keep a clone of a graph that holds a kernel --kernel matches (a capture may come
 * from one of its launches), with the clone's counterpart of each top-level node. */
static void kc_graph_keep(kc_graph_t *g, CUgraph graph) {
  if (!kc.capture || kc.done || !kc.cu.cuGraphClone || !kc.cu.cuGraphNodeFindInClone) return;
  int any = 0;
  for (size_t k = 0; k < g->k.n && !any; k++) any = kc_match_name(&kc.match, g->k.v[k].name);
  if (!any) return;
  g->node = calloc(g->k.n ? g->k.n : 1, sizeof *g->node);
  g->upd = calloc(g->k.n ? g->k.n : 1, sizeof *g->upd);
  if (!g->node || !g->upd) { g->stale = "out of host memory"; return; }
  kc_graph_reclone(g, graph);
}

/* The graph kerncap keeps for the executable graph exec, or NULL. */
static kc_graph_t *kc_graph_of(CUgraphExec exec) {
  for (size_t i = 0; i < kc.graphs.list.n; i++)
    if (kc.graphs.list.v[i].exec == exec) return &kc.graphs.list.v[i];
  return NULL;
}

/* Index of the instantiated graph's top-level node hNode, or -1. */
static long kc_top_index(const kc_graph_t *g, CUgraphNode hNode) {
  for (size_t i = 0; g->top_src && i < g->ntop; i++)
    if (g->top_src[i] == hNode) return (long)i;
  return -1;
}

/* API exit of a successful cuGraphExecKernelNodeSetParams (any version) or cuGraphExecNodeSetParams
 * of a kernel node: keep the parameters the next launches of exec use (packed: the caller's
 * argument pointers are dead after the call). */
static void kc_graph_node_updated(CUgraphExec exec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *np) {
  kc_graph_t *g = kc_graph_of(exec);
  if (!g || !g->upd || !np) return;
  for (size_t k = 0; k < g->k.n; k++) {
    if (g->k.v[k].orig != hNode) continue;
    kc_node_update_t *u = g->upd[k] ? g->upd[k] : calloc(1, sizeof *u);
    if (!u) { g->stale = "out of host memory"; return; }
    g->upd[k] = u;
    u->p = *np;
    kc_layout_t lay;
    kc_param_layout(u->p.func ? u->p.func : (CUfunction)u->p.kern, &lay);
    size_t total = lay.n ? lay.off[lay.n - 1] + lay.size[lay.n - 1] : 0;
    free(u->packed);
    u->packed = calloc(1, total ? total : 1);
    u->size = total;
    if (!u->packed) { g->stale = "out of host memory"; return; }
    if (np->extra && !np->kernelParams) g->stale = "cuGraphExecKernelNodeSetParams passed its arguments in `extra`, which kerncap does not copy";
    for (size_t j = 0; j < lay.n && np->kernelParams; j++) {
      memcpy(u->packed + lay.off[j], np->kernelParams[j], lay.size[j]);
      u->ptrs[j] = u->packed + lay.off[j];
    }
    u->p.kernelParams = u->ptrs;
    u->p.extra = NULL;
    return;
  }
}

/* API exit of a successful cuGraphExecUpdate: exec now runs graph's node parameters (and node
 * attributes). The kernel names are listed again (a kernel node may now run another function);
 * in capture mode the clone is made again from graph and the earlier per-node updates dropped
 * (the update overwrote them). Node pairing: the i-th top-level node of graph with the i-th of the
 * instantiated graph (cuGraphGetNodes order), which holds for graphs built the same way. */
static void kc_graph_exec_updated(const kc_exec_update_params *a) {
  kc_graph_t *g = kc_graph_of(a->hGraphExec);
  if (!g || !a->hGraph) return;
  kc_graph_t t;
  memset(&t, 0, sizeof t);
  kc_graph_walk(&t, a->hGraph, 0, 0);
  if (t.k.n == g->k.n) {
    for (size_t k = 0; k < g->k.n; k++) { free(g->k.v[k].name); g->k.v[k].name = t.k.v[k].name; t.k.v[k].name = NULL; }
    g->nodes = t.nodes;
  } else g->stale = "cuGraphExecUpdate gave a graph with another kernel node count";
  kc_graph_free(&t);
  if (kc.done) return;
  if (!g->upd) { kc_graph_keep(g, a->hGraph); return; } /* now it may hold a kernel --kernel matches */
  kc_graph_free_upd(g);
  kc_graph_reclone(g, a->hGraph);
}

/* API exit of a successful cuGraphExec{Memcpy,Memset,ChildGraph}NodeSetParams, or of
 * cuGraphExecNodeSetParams of such a node (gp: its generic parameters; else kind and params, the
 * type's own struct): mirror it onto the clone's node, since an ancestor kerncap runs must run with
 * the parameters the application's launches use; mark the graph stale when that fails. Updates of
 * other node kinds need no mirror: such a node is refused when it is an ancestor. */
static void kc_graph_other_updated(CUgraphExec exec, CUgraphNode hNode, CUgraphNodeType kind, const void *params, CUgraphNodeParams *gp) {
  kc_graph_t *g = kc_graph_of(exec);
  if (!g || !g->upd || kc.done) return;
  if (gp) kind = gp->type;
  if (kind != CU_GRAPH_NODE_TYPE_MEMCPY && kind != CU_GRAPH_NODE_TYPE_MEMSET && kind != CU_GRAPH_NODE_TYPE_GRAPH) return;
  long i = kc_top_index(g, hNode);
  CUgraphNode x = i >= 0 && g->top_clone ? g->top_clone[i] : NULL;
  CUgraphNodeParams cp;
  if (!gp && kind == CU_GRAPH_NODE_TYPE_GRAPH) { /* cuGraphExecChildGraphNodeSetParams: params is the new child graph */
    memset(&cp, 0, sizeof cp);
    cp.type = CU_GRAPH_NODE_TYPE_GRAPH;
    cp.graph.graph = (CUgraph)params;
    gp = &cp;
  }
  CUresult r = CUDA_ERROR_NOT_SUPPORTED;
  if (x && gp && kc.cu.cuGraphNodeSetParams) r = kc.cu.cuGraphNodeSetParams(x, gp);
  else if (x && kind == CU_GRAPH_NODE_TYPE_MEMCPY && kc.cu.cuGraphMemcpyNodeSetParams) r = kc.cu.cuGraphMemcpyNodeSetParams(x, params);
  else if (x && kind == CU_GRAPH_NODE_TYPE_MEMSET && kc.cu.cuGraphMemsetNodeSetParams) r = kc.cu.cuGraphMemsetNodeSetParams(x, params);
  if (r != CUDA_SUCCESS) {
    g->stale = kind == CU_GRAPH_NODE_TYPE_GRAPH ? "a child-graph node was updated in place (cuGraphExecChildGraphNodeSetParams), which kerncap could not follow"
                                                : "a memcpy or memset node was updated in place in a way kerncap could not follow";
    return;
  }
  if (kind != CU_GRAPH_NODE_TYPE_GRAPH) return;
  /* the child graph's kernel nodes may now run other functions: their names again, from the clone */
  CUgraph child;
  kc_graph_t t;
  memset(&t, 0, sizeof t);
  if (kc.cu.cuGraphChildGraphNodeGetGraph(x, &child) == CUDA_SUCCESS) kc_graph_walk(&t, child, 1, (size_t)i);
  size_t first = 0, cnt = 0;
  for (size_t k = 0; k < g->k.n; k++)
    if (g->k.v[k].top == (size_t)i) { if (!cnt) first = k; cnt++; }
  if (cnt != t.k.n) g->stale = "a child-graph node was updated in place with another number of kernel nodes";
  else
    for (size_t k = 0; k < cnt; k++) { free(g->k.v[first + k].name); g->k.v[first + k].name = t.k.v[k].name; t.k.v[k].name = NULL; }
  kc_graph_free(&t);
}

/* API exit of a successful cuGraphNodeSetEnabled: a disabled node does not run (nor count). */
static void kc_graph_node_enabled(const cuGraphNodeSetEnabled_params *a) {
  kc_graph_t *g = kc_graph_of(a->hGraphExec);
  if (!g) return;
  for (size_t k = 0; k < g->k.n; k++)
    if (g->k.v[k].orig == a->hNode) g->k.v[k].off = !a->isEnabled;
  long i = kc_top_index(g, a->hNode);
  if (i >= 0 && g->top_off) g->top_off[i] = !a->isEnabled;
}

/* Node kinds whose replay by kerncap in the application's process would be visible to the
 * application or is not reproducible: their name, or NULL when the kind is fine. */
static const char *kc_unreplayable_kind(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: case CU_GRAPH_NODE_TYPE_MEMCPY: case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_EMPTY: case CU_GRAPH_NODE_TYPE_GRAPH: return NULL;
    case CU_GRAPH_NODE_TYPE_HOST: return "host-function";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event-wait";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event-record";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL: return "external-semaphore-signal";
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: return "external-semaphore-wait";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "memory-allocation";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "memory-free";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "batch-memory-operation";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "unknown";
  }
}

/* The ancestors of node n in graph (n excluded), marked in `mark` (indexed like `all`). */
static int kc_mark_ancestors(CUgraphNode n, CUgraphNode *all, size_t nall, char *mark, int depth) {
  if (depth > 100000) return -1;
  size_t nd = 0;
  if (kc.cu.cuGraphNodeGetDependencies_v2(n, NULL, NULL, &nd) != CUDA_SUCCESS) return -1;
  if (!nd) return 0;
  CUgraphNode *deps = calloc(nd, sizeof *deps);
  if (!deps) return -1;
  int bad = kc.cu.cuGraphNodeGetDependencies_v2(n, deps, NULL, &nd) != CUDA_SUCCESS;
  for (size_t d = 0; d < nd && !bad; d++)
    for (size_t i = 0; i < nall; i++)
      if (all[i] == deps[d] && !mark[i]) {
        mark[i] = 1;
        bad = kc_mark_ancestors(all[i], all, nall, mark, depth + 1) != 0;
      }
  free(deps);
  return bad ? -1 : 0;
}

/* Node n and, for a child-graph node, everything inside it: the first kind kerncap cannot run
 * again (kc_unreplayable_kind), or NULL; each kernel node's module globals are collected
 * (kc_collect_globals_of) when globals is set. */
static const char *kc_check_subtree(CUgraphNode n, int globals, int depth) {
  CUgraphNodeType t;
  if (depth > 16 || kc.cu.cuGraphNodeGetType(n, &t) != CUDA_SUCCESS) return "unknown";
  const char *bad = kc_unreplayable_kind(t);
  if (bad) return bad;
  if (t == CU_GRAPH_NODE_TYPE_KERNEL && globals) {
    CUDA_KERNEL_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    const char *nm = kc_node_kernel_name(n);
    if (nm && kc.cu.cuGraphKernelNodeGetParams_v2(n, &ap) == CUDA_SUCCESS) {
      if (!ap.func && ap.kern && kc.cu.cuKernelGetFunction) kc.cu.cuKernelGetFunction(&ap.func, ap.kern);
      if (ap.func) kc_collect_globals_of(ap.func, nm);
    }
  }
  if (t != CU_GRAPH_NODE_TYPE_GRAPH) return NULL;
  CUgraph child;
  if (kc.cu.cuGraphChildGraphNodeGetGraph(n, &child) != CUDA_SUCCESS) return "unknown";
  size_t m = 0;
  CUgraphNode *in = kc_graph_nodes(child, &m);
  for (size_t i = 0; i < m && !bad; i++) bad = kc_check_subtree(in[i], globals, depth + 1);
  free(in);
  return bad;
}

/* Where kernel node k sits in g's clone: levels 0..*depth, gr[l] a graph and nd[l] its node (a
 * child-graph node for l < *depth, the kernel node at *depth). Kernel nodes inside a child graph
 * are found by walking the clone's copy of that child graph in the same depth-first
 * cuGraphGetNodes order as kc_graph_walk; the node's kernel name is checked. 0, or -1. */
#define KC_MAX_DEPTH 17
static int kc_find_in(CUgraph graph, size_t *left, CUgraph *gr, CUgraphNode *nd, int l, int *depth) {
  if (l >= KC_MAX_DEPTH) return -1;
  size_t n = 0;
  CUgraphNode *all = kc_graph_nodes(graph, &n);
  int found = -1;
  for (size_t i = 0; i < n && found < 0; i++) {
    CUgraphNodeType t;
    if (kc.cu.cuGraphNodeGetType(all[i], &t) != CUDA_SUCCESS) continue;
    gr[l] = graph;
    nd[l] = all[i];
    if (t == CU_GRAPH_NODE_TYPE_KERNEL) {
      if (!(*left)--) { *depth = l; found = 0; }
    } else if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child;
      if (kc.cu.cuGraphChildGraphNodeGetGraph(all[i], &child) == CUDA_SUCCESS && kc_find_in(child, left, gr, nd, l + 1, depth) == 0) found = 0;
    }
  }
  free(all);
  return found;
}
static int kc_find_node(kc_graph_t *g, size_t k, CUgraph *gr, CUgraphNode *nd, int *depth) {
  if (!g->clone || !g->top_clone || g->k.v[k].top >= g->ntop || !g->top_clone[g->k.v[k].top]) return -1;
  gr[0] = g->clone;
  nd[0] = g->top_clone[g->k.v[k].top];
  *depth = 0;
  if (g->k.v[k].orig) return 0;
  size_t first = k; /* the kernel nodes of one child-graph node are consecutive in g->k */
  while (first > 0 && g->k.v[first - 1].top == g->k.v[k].top) first--;
  size_t left = k - first;
  CUgraph child;
  if (kc.cu.cuGraphChildGraphNodeGetGraph(nd[0], &child) != CUDA_SUCCESS || kc_find_in(child, &left, gr, nd, 1, depth)) return -1;
  const char *nm = kc_node_kernel_name(nd[*depth]);
  return nm && !strcmp(nm, g->k.v[k].name) ? 0 : -1;
}

/* The launch attributes of a kernel node that change what or how it runs, for kerncap's own launch
 * of it and the replay (raw.json "launch.attributes"): cooperative, cluster dimension (and its
 * scheduling policy), priority, memory synchronization domain, preferred cluster dimension; an
 * attribute at its default value (0, a cluster of 1) is left out. Returns how many were written. */
static unsigned kc_node_attributes(CUgraphNode node, CUlaunchAttribute *out, unsigned max) {
  static const CUlaunchAttributeID ids[] = {CU_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                            CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, CU_LAUNCH_ATTRIBUTE_PRIORITY,
                                            CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION};
  unsigned n = 0;
  int cluster = 0;
  for (size_t i = 0; i < sizeof ids / sizeof *ids && n < max && kc.cu.cuGraphKernelNodeGetAttribute; i++) {
    CUlaunchAttributeValue v;
    memset(&v, 0, sizeof v);
    if (kc.cu.cuGraphKernelNodeGetAttribute(node, (CUkernelNodeAttrID)ids[i], (CUkernelNodeAttrValue *)&v) != CUDA_SUCCESS) continue;
    int keep = 0;
    switch (ids[i]) {
      case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: keep = v.cooperative != 0; break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        keep = cluster = v.clusterDim.x && v.clusterDim.y && v.clusterDim.z && (uint64_t)v.clusterDim.x * v.clusterDim.y * v.clusterDim.z > 1;
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: keep = cluster && v.clusterSchedulingPolicyPreference != 0; break;
      case CU_LAUNCH_ATTRIBUTE_PRIORITY: keep = v.priority != 0; break;
      case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: keep = v.memSyncDomain != 0; break;
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        keep = v.preferredClusterDim.x && v.preferredClusterDim.y && v.preferredClusterDim.z &&
               (uint64_t)v.preferredClusterDim.x * v.preferredClusterDim.y * v.preferredClusterDim.z > 1;
        break;
      default: break;
    }
    if (!keep) continue;
    out[n].id = ids[i];
    out[n].value = v;
    n++;
  }
  return n;
}

/* Run, on stream s, what precedes node nd in graph gr: a clone of gr without nd and without every
 * node that is not an ancestor of nd. top: gr is the top-level clone (then the application's
 * per-node updates and disabled nodes apply). Returns 0 when it ran (or there was nothing to run). */
static int kc_run_ancestors(kc_graph_t *g, CUgraph gr, CUgraphNode nd, int top, CUstream s) {
  size_t n = 0;
  CUgraphNode *all = kc_graph_nodes(gr, &n);
  char *mark = calloc(n ? n : 1, 1);
  CUgraphNode *off = calloc(n ? n : 1, sizeof *off); /* nodes of the pruned copy to disable */
  size_t noff = 0, kept = 0;
  CUgraph pr = NULL;
  CUgraphExec ex = NULL;
  int bad = !all || !mark || !off || kc_mark_ancestors(nd, all, n, mark, 0) || kc.cu.cuGraphClone(&pr, gr) != CUDA_SUCCESS;
  for (size_t i = 0; i < n && !bad; i++) {
    CUgraphNode x;
    if (kc.cu.cuGraphNodeFindInClone(&x, all[i], pr) != CUDA_SUCCESS) { bad = 1; break; }
    if (!mark[i]) { bad = kc.cu.cuGraphDestroyNode(x) != CUDA_SUCCESS; continue; }
    kept++;
    if (!top) continue;
    for (size_t j = 0; j < g->k.n && !bad; j++) /* the launch's own parameters for updated nodes */
      if (g->node[j] == all[i] && g->upd[j]) bad = kc.cu.cuGraphKernelNodeSetParams_v2(x, &g->upd[j]->p) != CUDA_SUCCESS;
    for (size_t j = 0; j < g->ntop; j++)
      if (g->top_clone[j] == all[i] && g->top_off && g->top_off[j]) off[noff++] = x;
  }
  if (!bad && kept) {
    bad = CU_CHECK(kc.cu.cuGraphInstantiateWithFlags(&ex, pr, 0)) != CUDA_SUCCESS;
    for (size_t i = 0; i < noff && !bad; i++) bad = !kc.cu.cuGraphNodeSetEnabled || kc.cu.cuGraphNodeSetEnabled(ex, off[i], 0) != CUDA_SUCCESS;
    if (!bad) bad = CU_CHECK(kc.cu.cuGraphLaunch(ex, s)) != CUDA_SUCCESS || CU_CHECK(kc.cu.cuStreamSynchronize(s)) != CUDA_SUCCESS;
  }
  if (ex) kc.cu.cuGraphExecDestroy(ex);
  if (pr) kc.cu.cuGraphDestroy(pr);
  free(all);
  free(mark);
  free(off);
  return bad ? -1 : 0;
}

/* Every ancestor of nd in gr (child-graph contents included) is a kind kerncap can run again;
 * globals: collect their kernels' module globals too. NULL, or the bad kind's name. */
static const char *kc_check_ancestors(CUgraph gr, CUgraphNode nd, int globals) {
  size_t n = 0;
  CUgraphNode *all = kc_graph_nodes(gr, &n);
  char *mark = calloc(n ? n : 1, 1);
  const char *bad = !all || !mark || kc_mark_ancestors(nd, all, n, mark, 0) ? "unknown" : NULL;
  for (size_t i = 0; i < n && !bad; i++)
    if (mark[i]) bad = kc_check_subtree(all[i], globals, 0);
  free(all);
  free(mark);
  return bad;
}

/*
 * Capture kernel node k of graph g at the start of a launch of g, in the application's process:
 *  1. synchronize; snapshot every live range (the graph's starting state) into memory/graph-state.bin;
 *  2. run the node's ancestors (pruned copies of the graph, with the launch's node parameters) on a
 *     private stream: the memory now holds what the node starts from. For a node inside a child
 *     graph, level by level: the top-level graph's ancestors of the child-graph node, then, inside
 *     that child graph, the ancestors of the next level's node, down to the kernel node's own
 *     earlier nodes (a child graph starts only when all its node's dependencies are done);
 *  3. capture the node as any launch (before state, kerncap's own launch of it with the node's
 *     launch attributes, after state);
 *  4. put every changed chunk back from graph-state.bin (checked by a second scan), so the
 *     application's own graph launch then starts from exactly its own state.
 * Returns NULL, or why the launch cannot be captured this way (nothing was changed then).
 */
static const char *kc_graph_capture(kc_graph_t *g, size_t k) {
  static char why[512];
  static CUlaunchAttribute attrs[8];
  static CUlaunchConfig cfg;
  if (g->stale) { snprintf(why, sizeof why, "graph %u changed since kerncap copied it: %s", g->id, g->stale); return why; }
  if (!g->clone || !g->node) return "the graph was not kept at instantiation";
  CUgraph gr[KC_MAX_DEPTH];
  CUgraphNode nd[KC_MAX_DEPTH];
  int depth = 0;
  if (kc_find_node(g, k, gr, nd, &depth)) return "the kernel node was not found in kerncap's copy of the graph";
  for (int l = 0; l <= depth; l++) {
    const char *bad = kc_check_ancestors(gr[l], nd[l], 0);
    if (bad) {
      snprintf(why, sizeof why, "an earlier node of graph %u%s is a %s node, which kerncap cannot run again without the application noticing", g->id,
               l ? " (inside a child graph)" : "", bad);
      return why;
    }
  }
  CUgraphNode tn = nd[depth];
  CUDA_KERNEL_NODE_PARAMS np;
  memset(&np, 0, sizeof np);
  if (depth == 0 && g->upd[k]) np = g->upd[k]->p;
  else if (kc.cu.cuGraphKernelNodeGetParams_v2(tn, &np) != CUDA_SUCCESS) return "cannot read the kernel node's parameters";
  if (!np.func && np.kern && kc.cu.cuKernelGetFunction) kc.cu.cuKernelGetFunction(&np.func, np.kern);
  if (!np.func) return "the kernel node has no function handle";

  /* 1. the graph's starting state */
  if (CU_CHECK(kc.cu.cuCtxSynchronize())) return "cuCtxSynchronize failed";
  kc_collect_globals_of(np.func, g->k.v[k].name);
  size_t n_target = kc.globals.n;
  for (int l = 0; l <= depth; l++) kc_check_ancestors(gr[l], nd[l], 1); /* the earlier kernels' module globals belong to the starting state too */
  kc_snap_t s0;
  int ok = kc_snap_live(&s0, "memory/graph-state.bin") == 0 && kc_snap_pass(&s0, 0) == 0;
  for (size_t i = n_target; i < kc.globals.n; i++) free(kc.globals.v[i].name);
  kc.globals.n = n_target; /* the capture keeps the target module's globals only */
  if (!ok) { kc_snap_free(&s0); return "the graph's starting state could not be saved"; }

  /* 2. the node's ancestors, level by level */
  CUstream gs = NULL;
  const char *res = NULL;
  int ran = CU_CHECK(kc.cu.cuStreamCreate(&gs, CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS;
  for (int l = 0; l <= depth && ran; l++) ran = kc_run_ancestors(g, gr[l], nd[l], l == 0, gs) == 0;
  if (!ran) res = "the node's ancestors could not be run";
  else {
    /* 3. the node itself, as any captured launch */
    memset(&kc.cap.L, 0, sizeof kc.cap.L);
    kc.cap.L.api = "cuGraphLaunch";
    kc.cap.L.f = np.func;
    kc.cap.L.stream = gs;
    kc.cap.L.grid[0] = np.gridDimX; kc.cap.L.grid[1] = np.gridDimY; kc.cap.L.grid[2] = np.gridDimZ;
    kc.cap.L.block[0] = np.blockDimX; kc.cap.L.block[1] = np.blockDimY; kc.cap.L.block[2] = np.blockDimZ;
    kc.cap.L.shmem = np.sharedMemBytes;
    kc.cap.L.kernel_params = np.kernelParams;
    kc.cap.L.extra = np.extra;
    memset(&cfg, 0, sizeof cfg);
    cfg.numAttrs = kc_node_attributes(tn, attrs, sizeof attrs / sizeof *attrs);
    if (cfg.numAttrs) {
      cfg.gridDimX = np.gridDimX; cfg.gridDimY = np.gridDimY; cfg.gridDimZ = np.gridDimZ;
      cfg.blockDimX = np.blockDimX; cfg.blockDimY = np.blockDimY; cfg.blockDimZ = np.blockDimZ;
      cfg.sharedMemBytes = np.sharedMemBytes;
      cfg.hStream = gs;
      cfg.attrs = attrs;
      kc.cap.L.config = &cfg;
    }
    kc.cap.graph_id = g->id;
    kc.cap.graph_node = k;
    snprintf(kc.cap.name, sizeof kc.cap.name, "%s", g->k.v[k].name);
    if (kc_capture_snapshot_and_launch()) res = "the capture of the node failed (see error.txt)";
  }
  /* 4. the application's state back, whatever happened above */
  if (ran || kc.done || !kc.base.enabled) {
    int was = kc.base.enabled;
    kc.base.enabled = 1;
    if (kc_snap_restore(&s0)) res = res ? res : "the application's memory could not be put back exactly (see error.txt)";
    if (!was) kc.base.enabled = 0;
  }
  char gsp[4200];
  kc_path_join(gsp, sizeof gsp, s0.file[0]);
  kc_snap_free(&s0);
  unlink(gsp);
  if (gs) kc.cu.cuStreamDestroy_v2(gs);
  return res;
}

/* API exit of a successful cuGraphInstantiate*: list the executable graph's kernel nodes. */
static void kc_graph_instantiated(const void *params) {
  const kc_instantiate_params *p = params;
  if (!p->phGraphExec || !*p->phGraphExec) return;
  for (size_t i = 0; i < kc.graphs.list.n; i++)
    if (kc.graphs.list.v[i].exec == *p->phGraphExec) { /* handle reused after cuGraphExecDestroy */
      kc_graph_free(&kc.graphs.list.v[i]);
      kc.graphs.list.v[i] = kc.graphs.list.v[--kc.graphs.list.n];
      break;
    }
  if (KC_VEC_PUSH(kc.graphs.list, (kc_graph_t){0})) return;
  kc_graph_t *g = &kc.graphs.list.v[kc.graphs.list.n - 1];
  g->exec = *p->phGraphExec;
  g->id = kc.graphs.next_id++;
  kc_graph_walk(g, p->hGraph, 0, 0);
  kc_graph_keep(g, p->hGraph);
}

/* Count a graph launch: one execution of each enabled kernel node (in node order), toward --dispatch too. */
static void kc_graph_launched(CUgraphExec exec) {
  kc_graph_t *g = kc_graph_of(exec);
  if (!g) return;
  if (!kc_nvtx_launch_passes()) return; /* outside --nvtx-include's ranges: its kernel nodes are not counted (c/cuda/kc_nvtx.h) */
  g->launches++;
  int bench = kc.ignore_launches && !kc.set.count_benchmarks;
  for (size_t k = 0; k < g->k.n; k++) {
    if (g->k.v[k].off) continue;
    kc_kstat_t *ks = kc_census_get(&kc.census, g->k.v[k].name);
    kc_census_add(&kc.census.launches, 1);
    if (!ks) continue;
    kc_census_add(&ks->count, 1);
    kc_census_add(&ks->graph, 1);
    /* several captures in one run (--kernel A --kernel B, --capture-all, --launch-count) take eager launches only */
    if (!kc.capture || kc.done || bench || kc.graphs.target_in_graph || kc_several()) continue;
    if (!kc_match_mask(&kc.match, ks)) continue;
    long m;
    if (kc_match_pick(&kc.match, ks, &m) < 0) continue;
    int won = kc.claimed ? 1 : kc_claim(&kc.proc);
    if (won <= 0) { kc.capture = 0; continue; } /* another process captures (or the claim failed) */
    kc.claimed = 1;
    kc.cap.launch_index = kc_census_read(&kc.census.launches) - 1;
    kc.cap.match_index = m;
    const char *why = kc_graph_capture(g, k);
    if (!why && kc.done) {
      kc_log("captured %s from kernel node %zu of CUDA graph %u", g->k.v[k].name, k, g->id);
      continue;
    }
    kc.graphs.target_in_graph = 1;
    kc.graphs.target_graph = g->id;
    kc.graphs.target_node = k;
    snprintf(kc.graphs.target_name, sizeof kc.graphs.target_name, "%s", g->k.v[k].name);
    snprintf(kc.graphs.target_why, sizeof kc.graphs.target_why, "%s", why ? why : "not captured");
    kc_log("the selected launch of %s runs inside CUDA graph %u (kernel node %zu): not captured: %s", g->k.v[k].name, g->id, k, kc.graphs.target_why);
  }
}

void kc_on_graph_node_update(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue || *(CUresult *)cb->functionReturnValue != CUDA_SUCCESS) return;
  const void *p = cb->functionParams;
  const kc_exec_node_params *en = p;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2: kc_graph_exec_updated(p); break; /* list mode too: kernel names */
    case CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled: kc_graph_node_enabled(p); break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2:
      if (kc.capture && !kc.done) kc_graph_node_updated(en->hGraphExec, en->hNode, ((const cuGraphExecKernelNodeSetParams_v2_params *)p)->nodeParams);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams: { /* the CUDA 11 struct: CUDA_KERNEL_NODE_PARAMS_v1, without kern and ctx */
      const CUDA_KERNEL_NODE_PARAMS_v1 *v1 = ((const cuGraphExecKernelNodeSetParams_params *)p)->nodeParams;
      if (!kc.capture || kc.done || !v1) break;
      CUDA_KERNEL_NODE_PARAMS np;
      memset(&np, 0, sizeof np);
      np.func = v1->func;
      np.gridDimX = v1->gridDimX; np.gridDimY = v1->gridDimY; np.gridDimZ = v1->gridDimZ;
      np.blockDimX = v1->blockDimX; np.blockDimY = v1->blockDimY; np.blockDimZ = v1->blockDimZ;
      np.sharedMemBytes = v1->sharedMemBytes;
      np.kernelParams = v1->kernelParams;
      np.extra = v1->extra;
      kc_graph_node_updated(en->hGraphExec, en->hNode, &np);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
      CUgraphNodeParams *gp = ((const cuGraphExecNodeSetParams_params *)p)->nodeParams;
      if (!kc.capture || kc.done || !gp) break;
      if (gp->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        CUDA_KERNEL_NODE_PARAMS np; /* CUDA_KERNEL_NODE_PARAMS_v3 is laid out as _v2 */
        memcpy(&np, &gp->kernel, sizeof np);
        kc_graph_node_updated(en->hGraphExec, en->hNode, &np);
      } else kc_graph_other_updated(en->hGraphExec, en->hNode, gp->type, NULL, gp);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams:
      if (kc.capture && !kc.done) kc_graph_other_updated(en->hGraphExec, en->hNode, CU_GRAPH_NODE_TYPE_MEMCPY, ((const cuGraphExecMemcpyNodeSetParams_params *)p)->copyParams, NULL);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams:
      if (kc.capture && !kc.done) kc_graph_other_updated(en->hGraphExec, en->hNode, CU_GRAPH_NODE_TYPE_MEMSET, ((const cuGraphExecMemsetNodeSetParams_params *)p)->memsetParams, NULL);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams:
      if (kc.capture && !kc.done) kc_graph_other_updated(en->hGraphExec, en->hNode, CU_GRAPH_NODE_TYPE_GRAPH, ((const cuGraphExecChildGraphNodeSetParams_params *)p)->childGraph, NULL);
      break;
    default: break;
  }
}

void kc_on_graph(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) {
    if (cb->callbackSite == CUPTI_API_ENTER) kc_graph_launched(((const cuGraphLaunch_params *)cb->functionParams)->hGraph);
    return;
  }
  if (cb->callbackSite == CUPTI_API_EXIT && cb->functionReturnValue && *(CUresult *)cb->functionReturnValue == CUDA_SUCCESS)
    kc_graph_instantiated(cb->functionParams);
}
