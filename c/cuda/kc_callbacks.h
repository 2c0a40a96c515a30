/* kc_callbacks.h — the CUPTI driver API callbacks the capture library enables, as X-macro lists of
 * (entry point, handler): c/cuda/kerncap_cuda.c builds its dispatch and its cuptiEnableCallback calls
 * from them; c/test/cupti_floor.c enables the same sets with a callback that does nothing (KC_FLOOR
 * "list", "run"), so scripts/bench-launch-overhead.sh can tell CUPTI's charge for the set from the
 * library's own work. `list` enables KC_LAUNCH_CALLBACKS and KC_DRIVER_CALLBACKS; `run` adds
 * KC_CAPTURE_CALLBACKS and the resource domain's MODULE_LOADED (both: MODULE_UNLOAD_STARTING and
 * CONTEXT_DESTROY_STARTING). A handler named here is declared by the includer that expands it. */
#ifndef KC_CALLBACKS_H
#define KC_CALLBACKS_H

/* The driver API callbacks whose handlers run without kc.mu (they take it when they need it): the
 * launches, and what keeps the launch path's caches right (stream captures, unloads). */
#define KC_LAUNCH_CALLBACKS(X)                                                                             \
  X(cuLaunchKernel, on_launch) X(cuLaunchKernel_ptsz, on_launch) X(cuLaunchKernelEx, on_launch)            \
  X(cuLaunchKernelEx_ptsz, on_launch) X(cuLaunchCooperativeKernel, on_launch)                              \
  X(cuLaunchCooperativeKernel_ptsz, on_launch)                                                             \
  X(cuStreamBeginCapture, on_stream_capture) X(cuStreamBeginCapture_ptsz, on_stream_capture)               \
  X(cuStreamBeginCapture_v2, on_stream_capture) X(cuStreamBeginCapture_v2_ptsz, on_stream_capture)         \
  X(cuStreamBeginCaptureToGraph, on_stream_capture) X(cuStreamBeginCaptureToGraph_ptsz, on_stream_capture) \
  X(cuStreamCreateForCaptureToCig, on_stream_capture)                                                      \
  X(cuStreamEndCapture, on_stream_capture) X(cuStreamEndCapture_ptsz, on_stream_capture)                   \
  X(cuModuleUnload, on_unload) X(cuLibraryUnload, on_unload) X(cuCtxDestroy, on_unload)                    \
  X(cuCtxDestroy_v2, on_unload) X(cuDevicePrimaryCtxRelease, on_unload)                                    \
  X(cuDevicePrimaryCtxRelease_v2, on_unload) X(cuDevicePrimaryCtxReset, on_unload)                         \
  X(cuDevicePrimaryCtxReset_v2, on_unload) X(cuGreenCtxDestroy, on_unload)

/* The driver API callbacks both modes enable besides the launches, with their handler (run with
 * kc.mu held): a graph launch counts its kernel nodes, which instantiation and updates name. */
#define KC_DRIVER_CALLBACKS(X)                                                                             \
  X(cuGraphLaunch, kc_on_graph) X(cuGraphLaunch_ptsz, kc_on_graph) X(cuGraphInstantiate, kc_on_graph)      \
  X(cuGraphInstantiate_v2, kc_on_graph) X(cuGraphInstantiateWithFlags, kc_on_graph)                        \
  X(cuGraphInstantiateWithParams, kc_on_graph) X(cuGraphInstantiateWithParams_ptsz, kc_on_graph)           \
  X(cuGraphExecUpdate, kc_on_graph_node_update) X(cuGraphExecUpdate_v2, kc_on_graph_node_update)           \
  X(cuGraphNodeSetEnabled, kc_on_graph_node_update)

/* The driver API callbacks only a capture needs (`run`; `list` enables none of them, so an
 * application's allocations and module loads cost it nothing): the allocation table the snapshot
 * reads, the module images, a graph node's new parameters. Run with kc.mu held. */
#define KC_CAPTURE_CALLBACKS(X)                                                                            \
  X(cuMemAlloc_v2, on_memory) X(cuMemAllocPitch_v2, on_memory) X(cuMemAllocManaged, on_memory)             \
  X(cuMemAllocAsync, on_memory) X(cuMemAllocAsync_ptsz, on_memory) X(cuMemAllocFromPoolAsync, on_memory)   \
  X(cuMemAllocFromPoolAsync_ptsz, on_memory) X(cuMemHostAlloc, on_memory) X(cuMemHostAlloc_v2, on_memory) \
  X(cuMemHostRegister, on_memory) X(cuMemHostRegister_v2, on_memory) X(cuMemMap, on_memory)               \
  X(cuMemUnmap, on_memory) X(cuMemFree_v2, on_memory) X(cuMemFreeAsync, on_memory)                         \
  X(cuMemFreeAsync_ptsz, on_memory) X(cuMemFreeHost, on_memory) X(cuMemHostUnregister, on_memory)          \
  X(cuModuleLoad, on_module_api) X(cuModuleLoadData, on_module_api) X(cuModuleLoadDataEx, on_module_api)   \
  X(cuModuleLoadFatBinary, on_module_api) X(cuLibraryLoadData, on_module_api)                              \
  X(cuLibraryLoadFromFile, on_module_api)                                                                  \
  X(cuGraphExecKernelNodeSetParams_v2, kc_on_graph_node_update) X(cuGraphExecKernelNodeSetParams, kc_on_graph_node_update) \
  X(cuGraphExecNodeSetParams, kc_on_graph_node_update) X(cuGraphExecMemcpyNodeSetParams, kc_on_graph_node_update)           \
  X(cuGraphExecMemsetNodeSetParams, kc_on_graph_node_update) X(cuGraphExecChildGraphNodeSetParams, kc_on_graph_node_update)

#endif
