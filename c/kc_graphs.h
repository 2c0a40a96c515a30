/* kc_graphs.h — kernels launched from CUDA graphs, for the CUDA capture library (included once by
 * c/kerncap_cuda.c after its driver entry points and kernel table).
 *
 * Kernel nodes never pass the launch callbacks: a graph runs through cuGraphLaunch. So at each
 * successful cuGraphInstantiate* the executable graph's kernel nodes are listed (recursing into
 * child-graph nodes; cuGraphGetNodes order: creation order, which for a stream-captured graph is
 * the order its launches were issued in), and each cuGraphLaunch counts one execution of each.
 * Updates in place (cuGraphExecKernelNodeSetParams) change parameters, not which kernels run, so
 * the counts stay right; in capture mode the last parameters set for each node are kept, and a
 * node selected by --dispatch is captured by kc_graph_capture (its comment says how); what it
 * cannot capture is reported by graph and node, never taken silently. cuGraphExecUpdate (a whole
 * new topology) is not followed yet: the clone then predates the update.
 * Threads: called with the library's mutex held.
 */
#ifndef KC_GRAPHS_H
#define KC_GRAPHS_H

/* A kernel node's parameters as set by cuGraphExecKernelNodeSetParams (packed like params.bin). */
typedef struct {
  CUDA_KERNEL_NODE_PARAMS p;
  char *packed;
  size_t size;
  void *ptrs[KC_MAX_PARAMS]; /* p.kernelParams points here: into packed */
} kc_node_update_t;

typedef struct {
  CUgraphExec exec;
  uint32_t id;
  uint64_t nodes, launches;
  char **kernels; /* mangled names of the kernel nodes, in node order */
  size_t nkernels;
  /* capture mode, graphs holding a kernel that --kernel matches: */
  CUgraph clone;          /* cuGraphClone at instantiation (the app may destroy its graph) */
  CUgraphNode *orig;      /* per kernel node: the application's node (NULL inside child graphs) */
  CUgraphNode *node;      /* per kernel node: the same node in `clone` */
  kc_node_update_t **upd; /* per kernel node: the last cuGraphExecKernelNodeSetParams, or NULL */
} kc_graph_t;

static struct {
  kc_graph_t *g;
  size_t n, cap;
  uint32_t next_id;
  /* the --dispatch target fell inside a graph launch */
  int target_in_graph;
  uint32_t target_graph;
  uint64_t target_node;
  char target_name[512];
  char target_why[512]; /* why that launch could not be captured */
} KG;

typedef struct { CUgraphExec *phGraphExec; CUgraph hGraph; } kc_instantiate_params; /* every cuGraphInstantiate* variant starts so */

static const char *kc_node_kernel_name(CUgraphNode node) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  if (!p_cuGraphKernelNodeGetParams_v2 || p_cuGraphKernelNodeGetParams_v2(node, &p) != CUDA_SUCCESS) return NULL;
  const char *name = NULL;
  if (p.func && p_cuFuncGetName && p_cuFuncGetName(&name, p.func) == CUDA_SUCCESS && name) return name;
  if (p.kern && p_cuKernelGetName && p_cuKernelGetName(&name, p.kern) == CUDA_SUCCESS && name) return name;
  return NULL;
}

static void kc_graph_walk(kc_graph_t *g, CUgraph graph, int depth) {
  size_t n = 0;
  if (depth > 16 || !p_cuGraphGetNodes || p_cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS || !n) return;
  CUgraphNode *nodes = calloc(n, sizeof *nodes);
  if (!nodes) return;
  if (p_cuGraphGetNodes(graph, nodes, &n) == CUDA_SUCCESS) {
    for (size_t i = 0; i < n; i++) {
      CUgraphNodeType t;
      if (p_cuGraphNodeGetType(nodes[i], &t) != CUDA_SUCCESS) continue;
      g->nodes++;
      if (t == CU_GRAPH_NODE_TYPE_KERNEL) {
        const char *name = kc_node_kernel_name(nodes[i]);
        char **k = realloc(g->kernels, (g->nkernels + 1) * sizeof *k);
        CUgraphNode *o = realloc(g->orig, (g->nkernels + 1) * sizeof *o);
        if (o) g->orig = o;
        if (!k || !o) break;
        g->kernels = k;
        g->orig[g->nkernels] = depth == 0 ? nodes[i] : NULL;
        g->kernels[g->nkernels++] = strdup(name ? name : "(unknown graph kernel)");
      } else if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
        CUgraph child;
        if (p_cuGraphChildGraphNodeGetGraph && p_cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS) kc_graph_walk(g, child, depth + 1);
      }
    }
  }
  free(nodes);
}

static void kc_graph_free(kc_graph_t *g) {
  for (size_t k = 0; k < g->nkernels; k++) {
    free(g->kernels[k]);
    if (g->upd && g->upd[k]) { free(g->upd[k]->packed); free(g->upd[k]); }
  }
  free(g->kernels);
  free(g->orig);
  free(g->node);
  free(g->upd);
  if (g->clone && p_cuGraphDestroy) p_cuGraphDestroy(g->clone);
}

/* Capture mode: keep a clone of a graph that holds a kernel --kernel matches (a capture may come
 * from one of its launches), with each top-level kernel node's handle in the clone. */
static void kc_graph_keep(kc_graph_t *g, CUgraph graph) {
  if (!S.capture || S.done || !p_cuGraphClone || !p_cuGraphNodeFindInClone) return;
  int any = 0;
  for (size_t k = 0; k < g->nkernels && !any; k++) any = name_matches(g->kernels[k]);
  if (!any || p_cuGraphClone(&g->clone, graph) != CUDA_SUCCESS) { g->clone = NULL; return; }
  g->node = calloc(g->nkernels ? g->nkernels : 1, sizeof *g->node);
  g->upd = calloc(g->nkernels ? g->nkernels : 1, sizeof *g->upd);
  if (!g->node || !g->upd) return;
  for (size_t k = 0; k < g->nkernels; k++)
    if (g->orig[k] && p_cuGraphNodeFindInClone(&g->node[k], g->orig[k], g->clone) != CUDA_SUCCESS) g->node[k] = NULL;
}

/* API exit of a successful cuGraphExecKernelNodeSetParams: keep the parameters the next launches use. */
static void kc_graph_node_updated(const cuGraphExecKernelNodeSetParams_v2_params *a) {
  for (size_t i = 0; i < KG.n; i++) {
    kc_graph_t *g = &KG.g[i];
    if (g->exec != a->hGraphExec || !g->upd) continue;
    for (size_t k = 0; k < g->nkernels; k++) {
      if (g->orig[k] != a->hNode) continue;
      kc_node_update_t *u = g->upd[k] ? g->upd[k] : calloc(1, sizeof *u);
      if (!u) return;
      g->upd[k] = u;
      u->p = *a->nodeParams;
      layout_t lay;
      param_layout(u->p.func, &lay);
      size_t total = lay.n ? lay.off[lay.n - 1] + lay.size[lay.n - 1] : 0;
      free(u->packed);
      u->packed = calloc(1, total ? total : 1);
      u->size = total;
      if (!u->packed) return;
      for (size_t j = 0; j < lay.n && a->nodeParams->kernelParams; j++) {
        memcpy(u->packed + lay.off[j], a->nodeParams->kernelParams[j], lay.size[j]);
        u->ptrs[j] = u->packed + lay.off[j];
      }
      u->p.kernelParams = u->ptrs;
      u->p.extra = NULL;
      return;
    }
  }
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
  if (p_cuGraphNodeGetDependencies_v2(n, NULL, NULL, &nd) != CUDA_SUCCESS) return -1;
  if (!nd) return 0;
  CUgraphNode *deps = calloc(nd, sizeof *deps);
  if (!deps) return -1;
  int bad = p_cuGraphNodeGetDependencies_v2(n, deps, NULL, &nd) != CUDA_SUCCESS;
  for (size_t d = 0; d < nd && !bad; d++)
    for (size_t i = 0; i < nall; i++)
      if (all[i] == deps[d] && !mark[i]) {
        mark[i] = 1;
        bad = kc_mark_ancestors(all[i], all, nall, mark, depth + 1) != 0;
      }
  free(deps);
  return bad ? -1 : 0;
}

static int capture_snapshot_and_launch(void);

/*
 * Capture kernel node k of graph g at the start of a launch of g, in the application's process:
 *  1. synchronize; snapshot every live range (the graph's starting state) into memory/graph-state.bin;
 *  2. run the node's ancestors (a pruned copy of the graph, with the launch's node parameters) on a
 *     private stream: the memory now holds what the node starts from;
 *  3. capture the node as any launch (before state, kerncap's own launch of it, after state);
 *  4. put every changed chunk back from graph-state.bin (checked by a second scan), so the
 *     application's own graph launch then starts from exactly its own state.
 * Returns NULL, or why the launch cannot be captured this way (nothing was changed then).
 */
static const char *kc_graph_capture(kc_graph_t *g, size_t k) {
  static char why[512];
  if (!g->clone || !g->node || !g->node[k]) return g->orig && !g->orig[k] ? "the kernel node is inside a child graph" : "the graph was not kept at instantiation";
  size_t n = 0;
  if (p_cuGraphGetNodes(g->clone, NULL, &n) != CUDA_SUCCESS || !n) return "cannot list the graph's nodes";
  CUgraphNode *all = calloc(n, sizeof *all);
  char *mark = calloc(n, 1);
  if (!all || !mark || p_cuGraphGetNodes(g->clone, all, &n) != CUDA_SUCCESS) { free(all); free(mark); return "cannot list the graph's nodes"; }
  const char *res = NULL;
  if (kc_mark_ancestors(g->node[k], all, n, mark, 0)) res = "cannot follow the graph's dependencies";
  for (size_t i = 0; i < n && !res; i++) {
    CUgraphNodeType t;
    if (!mark[i] || p_cuGraphNodeGetType(all[i], &t) != CUDA_SUCCESS) continue;
    const char *bad = kc_unreplayable_kind(t);
    if (bad) { snprintf(why, sizeof why, "an earlier node of graph %u is a %s node, which kerncap cannot run again without the application noticing", g->id, bad); res = why; }
  }
  CUDA_KERNEL_NODE_PARAMS np;
  memset(&np, 0, sizeof np);
  if (!res && g->upd[k]) np = g->upd[k]->p;
  else if (!res && p_cuGraphKernelNodeGetParams_v2(g->node[k], &np) != CUDA_SUCCESS) res = "cannot read the kernel node's parameters";
  if (!res && !np.func && np.kern && p_cuKernelGetFunction) p_cuKernelGetFunction(&np.func, np.kern);
  if (!res && !np.func) res = "the kernel node has no function handle";
  if (res) { free(all); free(mark); return res; }

  /* 1. the graph's starting state */
  if (CU_CHECK(p_cuCtxSynchronize())) { free(all); free(mark); return "cuCtxSynchronize failed"; }
  collect_globals_of(np.func, g->kernels[k]);
  size_t n_target = S.ng;
  for (size_t i = 0; i < n; i++) { /* the earlier kernels' module globals belong to the starting state too */
    CUgraphNodeType t;
    CUDA_KERNEL_NODE_PARAMS ap;
    if (!mark[i] || p_cuGraphNodeGetType(all[i], &t) != CUDA_SUCCESS || t != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    const char *nm = kc_node_kernel_name(all[i]);
    if (nm && p_cuGraphKernelNodeGetParams_v2(all[i], &ap) == CUDA_SUCCESS && ap.func) collect_globals_of(ap.func, nm);
  }
  kc_snap_t s0;
  int ok = kc_snap_init(&s0, S.nregions + S.ng) == 0;
  s0.file[0] = "memory/graph-state.bin";
  for (size_t i = 0; ok && i < S.nregions; i++) ok = kc_item_init(&s0, i, S.regions[i].va, S.regions[i].size, S.regions[i].kind, NULL) == 0;
  for (size_t i = 0; ok && i < S.ng; i++) ok = kc_item_init(&s0, S.nregions + i, S.g[i].va, S.g[i].size, "global", S.g[i].name) == 0;
  if (ok) {
    S.own_load = 1;
    kc_snap_plan(&s0);
    S.own_load = 0;
    ok = kc_snap_pass(&s0, 0) == 0;
  }
  for (size_t i = n_target; i < S.ng; i++) free(S.g[i].name);
  S.ng = n_target; /* the capture keeps the target module's globals only */
  if (!ok) { kc_snap_free(&s0); free(all); free(mark); return "the graph's starting state could not be saved"; }

  /* 2. the node's ancestors, from a pruned copy of the graph */
  CUgraph pr = NULL;
  CUgraphExec ex = NULL;
  CUstream gs = NULL;
  int ran = 0;
  if (p_cuGraphClone(&pr, g->clone) == CUDA_SUCCESS && CU_CHECK(p_cuStreamCreate(&gs, CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS) {
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
      CUgraphNode x;
      if (p_cuGraphNodeFindInClone(&x, all[i], pr) != CUDA_SUCCESS) { bad = 1; break; }
      if (!mark[i]) { bad = p_cuGraphDestroyNode(x) != CUDA_SUCCESS; continue; }
      for (size_t j = 0; j < g->nkernels; j++) /* the launch's own parameters for updated nodes */
        if (g->node[j] == all[i] && g->upd[j]) bad = p_cuGraphKernelNodeSetParams_v2(x, &g->upd[j]->p) != CUDA_SUCCESS;
    }
    if (!bad && CU_CHECK(p_cuGraphInstantiateWithFlags(&ex, pr, 0)) == CUDA_SUCCESS && CU_CHECK(p_cuGraphLaunch(ex, gs)) == CUDA_SUCCESS &&
        CU_CHECK(p_cuStreamSynchronize(gs)) == CUDA_SUCCESS)
      ran = 1;
  }
  if (!ran) res = "the node's ancestors could not be run";
  else {
    /* 3. the node itself, as any captured launch */
    memset(&C.L, 0, sizeof C.L);
    C.L.api = "cuGraphLaunch";
    C.L.f = np.func;
    C.L.stream = gs;
    C.L.grid[0] = np.gridDimX; C.L.grid[1] = np.gridDimY; C.L.grid[2] = np.gridDimZ;
    C.L.block[0] = np.blockDimX; C.L.block[1] = np.blockDimY; C.L.block[2] = np.blockDimZ;
    C.L.shmem = np.sharedMemBytes;
    C.L.kernel_params = np.kernelParams;
    C.L.extra = np.extra;
    C.graph_id = g->id;
    C.graph_node = k;
    snprintf(C.name, sizeof C.name, "%s", g->kernels[k]);
    if (capture_snapshot_and_launch()) res = "the capture of the node failed (see error.txt)";
  }
  /* 4. the application's state back, whatever happened above */
  if (ran || S.done || !S.enabled) {
    int was = S.enabled;
    S.enabled = 1;
    if (kc_snap_restore(&s0)) res = res ? res : "the application's memory could not be put back exactly (see error.txt)";
    if (!was) S.enabled = 0;
  }
  char gsp[4200];
  path_join(gsp, sizeof gsp, s0.file[0]);
  kc_snap_free(&s0);
  unlink(gsp);
  if (ex) p_cuGraphExecDestroy(ex);
  if (pr) p_cuGraphDestroy(pr);
  if (gs) p_cuStreamDestroy_v2(gs);
  free(all);
  free(mark);
  return res;
}

/* API exit of a successful cuGraphInstantiate*: list the executable graph's kernel nodes. */
static void kc_graph_instantiated(const void *params) {
  const kc_instantiate_params *p = params;
  if (!p->phGraphExec || !*p->phGraphExec) return;
  for (size_t i = 0; i < KG.n; i++)
    if (KG.g[i].exec == *p->phGraphExec) { /* handle reused after cuGraphExecDestroy */
      kc_graph_free(&KG.g[i]);
      KG.g[i] = KG.g[--KG.n];
      break;
    }
  if (KG.n == KG.cap) {
    size_t c = KG.cap ? KG.cap * 2 : 16;
    kc_graph_t *g = realloc(KG.g, c * sizeof *g);
    if (!g) return;
    KG.g = g;
    KG.cap = c;
  }
  kc_graph_t *g = &KG.g[KG.n++];
  memset(g, 0, sizeof *g);
  g->exec = *p->phGraphExec;
  g->id = KG.next_id++;
  kc_graph_walk(g, p->hGraph, 0);
  kc_graph_keep(g, p->hGraph);
}

/* Count a graph launch: one execution of each kernel node (in node order), toward --dispatch too. */
static void kc_graph_launched(CUgraphExec exec) {
  kc_graph_t *g = NULL;
  for (size_t i = 0; i < KG.n && !g; i++)
    if (KG.g[i].exec == exec) g = &KG.g[i];
  if (!g) return;
  g->launches++;
  int bench = ignore_launches && !S.count_benchmarks;
  for (size_t k = 0; k < g->nkernels; k++) {
    kstat_t *ks = kstat_get(g->kernels[k]);
    S.launches++;
    if (!ks) continue;
    ks->count++;
    ks->graph++;
    /* several captures in one run (--kernel A --kernel B, --capture-all) take eager launches only */
    if (!S.capture || S.done || bench || KG.target_in_graph || S.ntargets > 1 || S.capture_all) continue;
    if (!ks->asked) { ks->mask = target_mask(g->kernels[k]); ks->asked = 1; }
    if (!ks->mask) continue;
    long m = S.tmatches[0]++;
    if (m != S.dispatch) continue;
    int won = S.claimed ? 1 : kc_claim(&KP);
    if (won <= 0) { S.capture = 0; continue; } /* another process captures (or the claim failed) */
    S.claimed = 1;
    C.launch_index = S.launches - 1;
    C.match_index = m;
    const char *why = kc_graph_capture(g, k);
    if (!why && S.done) {
      logf_("captured %s from kernel node %zu of CUDA graph %u", g->kernels[k], k, g->id);
      continue;
    }
    KG.target_in_graph = 1;
    KG.target_graph = g->id;
    KG.target_node = k;
    snprintf(KG.target_name, sizeof KG.target_name, "%s", g->kernels[k]);
    snprintf(KG.target_why, sizeof KG.target_why, "%s", why ? why : "not captured");
    logf_("the selected launch of %s runs inside CUDA graph %u (kernel node %zu): not captured: %s", g->kernels[k], g->id, k, KG.target_why);
  }
}

/* kernels.json: ,"graphs":[...],"graph_target":{...} */
static void kc_graphs_json(FILE *f) {
  fputs(",\"graphs\":[", f);
  for (size_t i = 0; i < KG.n; i++)
    fprintf(f, "%s{\"id\":%u,\"nodes\":%llu,\"kernel_nodes\":%zu,\"launches\":%llu}", i ? "," : "", KG.g[i].id,
            (unsigned long long)KG.g[i].nodes, KG.g[i].nkernels, (unsigned long long)KG.g[i].launches);
  fputs("]", f);
  if (KG.target_in_graph) {
    fprintf(f, ",\"graph_target\":{\"graph\":%u,\"kernel_node\":%llu,\"name\":", KG.target_graph, (unsigned long long)KG.target_node);
    kc_json_str(f, KG.target_name);
    fputs(",\"why\":", f);
    kc_json_str(f, KG.target_why);
    fputs("}", f);
  }
}
#endif
