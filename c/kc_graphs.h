/* kc_graphs.h — kernels launched from CUDA graphs, for the CUDA capture library (included once by
 * c/kerncap_cuda.c after its driver entry points and kernel table).
 *
 * Kernel nodes never pass the launch callbacks: a graph runs through cuGraphLaunch. So at each
 * successful cuGraphInstantiate* the executable graph's kernel nodes are listed (recursing into
 * child-graph nodes; cuGraphGetNodes order: creation order, which for a stream-captured graph is
 * the order its launches were issued in), and each cuGraphLaunch counts one execution of each.
 * Updates in place (cuGraphExecKernelNodeSetParams, cuGraphExecUpdate) change parameters, not
 * which kernels run, so the counts stay right; the parameters are not followed (capture of a
 * graph-launched kernel is not supported yet: the launch that --dispatch selects inside a graph is
 * reported, never taken silently).
 * Threads: called with the library's mutex held.
 */
#ifndef KC_GRAPHS_H
#define KC_GRAPHS_H

typedef struct {
  CUgraphExec exec;
  uint32_t id;
  uint64_t nodes, launches;
  char **kernels; /* mangled names of the kernel nodes, in node order */
  size_t nkernels;
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
        if (!k) break;
        g->kernels = k;
        g->kernels[g->nkernels++] = strdup(name ? name : "(unknown graph kernel)");
      } else if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
        CUgraph child;
        if (p_cuGraphChildGraphNodeGetGraph && p_cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS) kc_graph_walk(g, child, depth + 1);
      }
    }
  }
  free(nodes);
}

/* API exit of a successful cuGraphInstantiate*: list the executable graph's kernel nodes. */
static void kc_graph_instantiated(const void *params) {
  const kc_instantiate_params *p = params;
  if (!p->phGraphExec || !*p->phGraphExec) return;
  for (size_t i = 0; i < KG.n; i++)
    if (KG.g[i].exec == *p->phGraphExec) { /* handle reused after cuGraphExecDestroy */
      for (size_t k = 0; k < KG.g[i].nkernels; k++) free(KG.g[i].kernels[k]);
      free(KG.g[i].kernels);
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
    if (!S.capture || S.done || bench || KG.target_in_graph) continue;
    if (!ks->match) ks->match = name_matches(g->kernels[k]) ? 1 : -1;
    if (ks->match < 0) continue;
    if (S.matches++ != S.dispatch) continue;
    KG.target_in_graph = 1;
    KG.target_graph = g->id;
    KG.target_node = k;
    snprintf(KG.target_name, sizeof KG.target_name, "%s", g->kernels[k]);
    logf_("the selected launch of %s runs inside CUDA graph %u (kernel node %zu): not captured", g->kernels[k], g->id, k);
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
    fputs("}", f);
  }
}
#endif
