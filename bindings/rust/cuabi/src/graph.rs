//! CUDA graphs (include/cuabi/graph.h): stream capture, explicit nodes,
//! executables launched, uploaded and updated in place.
//!
//! The C library keeps alive what a graph's nodes name through cuabi
//! handles (kernels, buffers, views, events, child graphs), so a graph and
//! its executables may outlive the Rust values that built them. What it
//! cannot keep, the types here do: host memory a copy node reads or writes
//! is borrowed for the graph's lifetime `'h` (an executable carries the
//! same lifetime), and host-node closures are owned by the graph and its
//! executables.
use std::any::Any;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use crate::argpack::ArgPack;
use crate::device::Device;
use crate::error::{c_string, check, Error, Result};
use crate::event::Event;
use crate::launch::LaunchConfig;
use crate::memory::{Buffer, Pod};
use crate::objcode::Kernel;
use crate::stream::Stream;
use crate::sys;
use crate::view::View;

/// Capture modes (`cuabi_capture_mode`).
pub type CaptureMode = sys::cuabi_capture_mode;
/// Capture states (`cuabi_capture_status`).
pub type CaptureStatus = sys::cuabi_capture_status;
/// Node kinds (`cuabi_graph_node_kind`).
pub type GraphNodeKind = sys::cuabi_graph_node_kind;
/// Kinds of conditional nodes (`cuabi_graph_conditional_type`).
pub type ConditionalType = sys::cuabi_graph_conditional_type;

shared_handle!(
    /// The C graph handle (see [`Graph`]).
    GraphRaw, sys::cuabi_graph, sys::cuabi_graph_retain, sys::cuabi_graph_release
);
shared_handle!(
    /// One node of a graph; keeps its graph alive.
    GraphNode, sys::cuabi_graph_node, sys::cuabi_graph_node_retain, sys::cuabi_graph_node_release
);
handle_core!(
    /// The C executable handle (see [`GraphExec`]).
    GraphExecRaw, sys::cuabi_graph_exec, sys::cuabi_graph_exec_release
);

// SAFETY: api/graph.toml: every function may be called from any thread;
// queries may run at once and additions to one graph are serialised.
unsafe impl Send for GraphRaw {}
unsafe impl Sync for GraphRaw {}
unsafe impl Send for GraphNode {}
unsafe impl Sync for GraphNode {}
// SAFETY: launches take &self (the driver orders them); updates take &mut.
unsafe impl Send for GraphExecRaw {}
unsafe impl Sync for GraphExecRaw {}

/// Invariant in 'h: a graph borrowing host memory for 'h must not pass as
/// one with a shorter borrow (that would let a copy node outlive its memory).
type Invariant<'h> = PhantomData<fn(&'h ()) -> &'h ()>;

/// What a graph owns for its host nodes (shared with its executables and
/// its conditional bodies).
type Owned = Arc<Mutex<Vec<Box<dyn Any + Send>>>>;

/// A CUDA graph under construction. `'h` bounds the host memory its copy
/// nodes borrow (`'static` when they borrow none).
pub struct Graph<'h> {
    raw: GraphRaw,
    owned: Owned,
    _host: Invariant<'h>,
}

impl Clone for Graph<'_> {
    fn clone(&self) -> Self {
        Graph { raw: self.raw.clone(), owned: self.owned.clone(), _host: PhantomData }
    }
}

impl core::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Graph({:?})", self.raw)
    }
}

fn deps_of(deps: &[&GraphNode]) -> Vec<*mut sys::cuabi_graph_node> {
    deps.iter().map(|d| d.as_raw()).collect()
}

fn node_from(f: impl FnOnce(*mut *mut sys::cuabi_graph_node) -> sys::cuabi_status) -> Result<GraphNode> {
    GraphNode::create(f)
}

/// Host nodes call this with a pointer to their boxed closure.
unsafe extern "C" fn run_host(payload: *mut c_void) {
    let f = unsafe { &*(payload as *const Box<dyn Fn() + Send + Sync>) };
    // A panic must not cross into the driver: report it and go on.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        eprintln!("cuabi: a graph host node panicked");
    }
}

impl<'h> Graph<'h> {
    /// An empty graph.
    pub fn new() -> Result<Graph<'h>> {
        Ok(Graph::from_raw_graph(GraphRaw::create(|o| unsafe { sys::cuabi_graph_create(o) })?))
    }

    fn from_raw_graph(raw: GraphRaw) -> Graph<'h> {
        Graph { raw, owned: Arc::new(Mutex::new(Vec::new())), _host: PhantomData }
    }

    /// The C handle.
    pub fn as_raw(&self) -> *mut sys::cuabi_graph {
        self.raw.as_raw()
    }

    /// The CUgraph (owned by cuabi).
    pub fn raw_graph(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_graph_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// The graph's device: None while no node names one, or nodes name several.
    pub fn device(&self) -> Result<Option<Device>> {
        let mut d = core::ptr::null_mut();
        check(unsafe { sys::cuabi_graph_device(&mut d, self.as_raw()) })?;
        if d.is_null() {
            return Ok(None);
        }
        check(unsafe { sys::cuabi_device_retain(d) })?;
        Ok(unsafe { Device::from_raw(d) })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> Result<usize> {
        let mut n = 0usize;
        check(unsafe { sys::cuabi_graph_node_count(&mut n, self.as_raw()) })?;
        Ok(n)
    }

    /// The node at `index` (in the order nodes were added, or captured).
    pub fn node(&self, index: usize) -> Result<GraphNode> {
        node_from(|o| unsafe { sys::cuabi_graph_node_at(o, self.as_raw(), index) })
    }

    /// Every node.
    pub fn nodes(&self) -> Result<Vec<GraphNode>> {
        (0..self.node_count()?).map(|i| self.node(i)).collect()
    }

    /// A kernel node: `kernel` with the pack's current values (copied now)
    /// and the configuration's grid, block, shared memory and attributes;
    /// the configuration's stream or device names the device.
    pub fn add_kernel(&self, deps: &[&GraphNode], kernel: &Kernel, pack: &ArgPack,
                      config: &LaunchConfig) -> Result<GraphNode> {
        let c = config.to_c()?;
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_kernel(o, self.as_raw(), d.as_mut_ptr(), d.len(), kernel.as_raw(),
                                        pack.as_raw(), &c)
        })
    }

    /// A copy of `size` bytes between buffers.
    pub fn add_memcpy(&self, deps: &[&GraphNode], dst: &Buffer, dst_offset: usize, src: &Buffer,
                      src_offset: usize, size: usize) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memcpy(o, self.as_raw(), d.as_mut_ptr(), d.len(), dst.as_raw(),
                                        dst_offset, src.as_raw(), src_offset, size)
        })
    }

    /// A copy from host memory (read each time the node runs; borrowed for
    /// the graph's lifetime) into a buffer.
    pub fn add_memcpy_from_host<T: Pod>(&self, deps: &[&GraphNode], dst: &Buffer, dst_offset: usize,
                                        src: &'h [T]) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memcpy_from_host(o, self.as_raw(), d.as_mut_ptr(), d.len(),
                                                  dst.as_raw(), dst_offset,
                                                  src.as_ptr() as *const c_void,
                                                  core::mem::size_of_val(src))
        })
    }

    /// A copy from a buffer into host memory (written each time the node
    /// runs; borrowed mutably for the graph's lifetime).
    pub fn add_memcpy_to_host<T: Pod>(&self, deps: &[&GraphNode], dst: &'h mut [T], src: &Buffer,
                                      src_offset: usize) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memcpy_to_host(o, self.as_raw(), d.as_mut_ptr(), d.len(),
                                                dst.as_mut_ptr() as *mut c_void, src.as_raw(),
                                                src_offset, core::mem::size_of_val(dst))
        })
    }

    /// A copy between two contiguous views of the same size.
    pub fn add_memcpy_view(&self, deps: &[&GraphNode], dst: &View, src: &View) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memcpy_view(o, self.as_raw(), d.as_mut_ptr(), d.len(), dst.as_raw(),
                                             src.as_raw())
        })
    }

    /// A memset of `count` elements of `width` bytes (1, 2, 4).
    pub fn add_memset(&self, deps: &[&GraphNode], buffer: &Buffer, offset: usize, value: u32,
                      width: u32, count: usize) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memset(o, self.as_raw(), d.as_mut_ptr(), d.len(), buffer.as_raw(),
                                        offset, value, width, count)
        })
    }

    /// A host node running `f` on a driver thread (it must not call CUDA).
    /// The graph and its executables own the closure.
    pub fn add_host<F: Fn() + Send + Sync + 'static>(&self, deps: &[&GraphNode], f: F) -> Result<GraphNode> {
        let boxed: Box<Box<dyn Fn() + Send + Sync>> = Box::new(Box::new(f));
        let payload = &*boxed as *const Box<dyn Fn() + Send + Sync> as *mut c_void;
        let mut d = deps_of(deps);
        let node = node_from(|o| unsafe {
            sys::cuabi_graph_add_host(o, self.as_raw(), d.as_mut_ptr(), d.len(), Some(run_host), payload)
        })?;
        self.owned.lock().map_err(|_| Error::internal("graph lock poisoned"))?.push(boxed);
        Ok(node)
    }

    /// An empty node (a join point).
    pub fn add_empty(&self, deps: &[&GraphNode]) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe { sys::cuabi_graph_add_empty(o, self.as_raw(), d.as_mut_ptr(), d.len()) })
    }

    /// A node recording `event`.
    pub fn add_event_record(&self, deps: &[&GraphNode], event: &Event) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_event_record(o, self.as_raw(), d.as_mut_ptr(), d.len(), event.as_raw())
        })
    }

    /// A node waiting for `event`.
    pub fn add_event_wait(&self, deps: &[&GraphNode], event: &Event) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        node_from(|o| unsafe {
            sys::cuabi_graph_add_event_wait(o, self.as_raw(), d.as_mut_ptr(), d.len(), event.as_raw())
        })
    }

    /// A node running a copy of `child` (taken now).
    pub fn add_child(&self, deps: &[&GraphNode], child: &Graph<'h>) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        let node = node_from(|o| unsafe {
            sys::cuabi_graph_add_child(o, self.as_raw(), d.as_mut_ptr(), d.len(), child.as_raw())
        })?;
        // The child's host closures run as part of this graph now.
        self.owned.lock().map_err(|_| Error::internal("graph lock poisoned"))?
            .push(Box::new(child.owned.clone()));
        Ok(node)
    }

    /// A conditional handle for this graph on `device`; with `default`, each
    /// launch starts with that value. Kernels set it with
    /// `cudaGraphSetConditional` (see docs/graphs.md).
    pub fn conditional_handle(&self, device: &Device, default: Option<u32>) -> Result<u64> {
        let flags = if default.is_some() { sys::CUABI_GRAPH_CONDITIONAL_ASSIGN_DEFAULT as u32 } else { 0 };
        let mut h = 0u64;
        check(unsafe {
            sys::cuabi_graph_conditional_handle_create(&mut h, self.as_raw(), device.as_raw(),
                                                       default.unwrap_or(0), flags)
        })?;
        Ok(h)
    }

    /// A conditional node with `bodies` body graphs (see [`Graph::add_while`]).
    pub fn add_conditional(&self, deps: &[&GraphNode], handle: u64, kind: ConditionalType,
                           bodies: u32) -> Result<(GraphNode, Vec<Graph<'h>>)> {
        let mut d = deps_of(deps);
        let node = node_from(|o| unsafe {
            sys::cuabi_graph_add_conditional(o, self.as_raw(), d.as_mut_ptr(), d.len(), handle, kind, bodies)
        })?;
        let graphs = (0..bodies)
            .map(|i| {
                let raw = GraphRaw::create(|o| unsafe { sys::cuabi_graph_node_body(o, node.as_raw(), i) })?;
                Ok(Graph { raw, owned: self.owned.clone(), _host: PhantomData })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((node, graphs))
    }

    /// A while node: its body runs while the handle is non-zero.
    pub fn add_while(&self, deps: &[&GraphNode], handle: u64) -> Result<(GraphNode, Graph<'h>)> {
        let (n, mut b) = self.add_conditional(deps, handle, sys::CUABI_GRAPH_CONDITIONAL_WHILE, 1)?;
        Ok((n, b.remove(0)))
    }

    /// An if node: its body runs once when the handle is non-zero.
    pub fn add_if(&self, deps: &[&GraphNode], handle: u64) -> Result<(GraphNode, Graph<'h>)> {
        let (n, mut b) = self.add_conditional(deps, handle, sys::CUABI_GRAPH_CONDITIONAL_IF, 1)?;
        Ok((n, b.remove(0)))
    }

    /// `to` runs after `from` for each pair (a cycle or an existing edge is refused).
    pub fn add_dependencies(&self, edges: &[(&GraphNode, &GraphNode)]) -> Result<()> {
        let mut from: Vec<_> = edges.iter().map(|e| e.0.as_raw()).collect();
        let mut to: Vec<_> = edges.iter().map(|e| e.1.as_raw()).collect();
        check(unsafe { sys::cuabi_graph_add_dependencies(self.as_raw(), from.as_mut_ptr(), to.as_mut_ptr(), edges.len()) })
    }

    /// Remove the edges.
    pub fn remove_dependencies(&self, edges: &[(&GraphNode, &GraphNode)]) -> Result<()> {
        let mut from: Vec<_> = edges.iter().map(|e| e.0.as_raw()).collect();
        let mut to: Vec<_> = edges.iter().map(|e| e.1.as_raw()).collect();
        check(unsafe { sys::cuabi_graph_remove_dependencies(self.as_raw(), from.as_mut_ptr(), to.as_mut_ptr(), edges.len()) })
    }

    /// The graph as Graphviz text.
    pub fn to_dot(&self, verbose: bool) -> Result<String> {
        let flags = if verbose { sys::CUABI_GRAPH_DOT_VERBOSE.0 as u32 } else { 0 };
        let mut size = 0usize;
        let st = unsafe { sys::cuabi_graph_debug_dot_text(core::ptr::null_mut(), &mut size, self.as_raw(), flags) };
        if st != sys::CUABI_ERROR_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut buf = vec![0u8; size];
        check(unsafe { sys::cuabi_graph_debug_dot_text(buf.as_mut_ptr().cast(), &mut size, self.as_raw(), flags) })?;
        let text = CStr::from_bytes_until_nul(&buf).map_err(|_| Error::internal("dot text without NUL"))?;
        Ok(text.to_string_lossy().into_owned())
    }

    /// Write the Graphviz text to a file.
    pub fn debug_dot(&self, path: &str, verbose: bool) -> Result<()> {
        let p = c_string("path", path)?;
        let flags = if verbose { sys::CUABI_GRAPH_DOT_VERBOSE.0 as u32 } else { 0 };
        check(unsafe { sys::cuabi_graph_debug_dot(self.as_raw(), p.as_ptr(), flags) })
    }

    /// The executable. It keeps this graph (and what it keeps) alive.
    pub fn instantiate(&self) -> Result<GraphExec<'h>> {
        self.instantiate_with(&InstantiateOptions::default())
    }

    /// The executable, with flags (auto-free, upload, device launch, node priority).
    pub fn instantiate_with(&self, options: &InstantiateOptions) -> Result<GraphExec<'h>> {
        let mut o = sys::cuabi_graph_instantiate_options::default();
        check(unsafe { sys::cuabi_graph_instantiate_options_init(&mut o, sys::CUABI_GRAPH_INSTANTIATE_OPTIONS_VERSION) })?;
        let mut flags = 0u32;
        if options.auto_free_on_launch { flags |= sys::CUABI_GRAPH_INSTANTIATE_AUTO_FREE_ON_LAUNCH.0 as u32 }
        if options.device_launch { flags |= sys::CUABI_GRAPH_INSTANTIATE_DEVICE_LAUNCH.0 as u32 }
        if options.use_node_priority { flags |= sys::CUABI_GRAPH_INSTANTIATE_USE_NODE_PRIORITY.0 as u32 }
        if let Some(s) = options.upload_stream {
            flags |= sys::CUABI_GRAPH_INSTANTIATE_UPLOAD.0 as u32;
            o.upload_stream = s.as_raw();
        }
        o.flags = flags;
        let raw = GraphExecRaw::create(|out| unsafe { sys::cuabi_graph_instantiate(out, self.as_raw(), &o) })?;
        Ok(GraphExec { raw, owned: vec![self.owned.clone()], _host: PhantomData })
    }
}

/// Instantiation flags (cuda.core's CompleteOptions).
#[derive(Clone, Copy, Debug, Default)]
pub struct InstantiateOptions<'s> {
    pub auto_free_on_launch: bool,
    /// Upload on this stream as part of instantiation.
    pub upload_stream: Option<&'s Stream>,
    pub device_launch: bool,
    pub use_node_priority: bool,
}

impl GraphNode {
    /// The node's kind.
    pub fn kind(&self) -> Result<GraphNodeKind> {
        let mut k = sys::cuabi_graph_node_kind(0);
        check(unsafe { sys::cuabi_graph_node_type(&mut k, self.as_raw()) })?;
        Ok(k)
    }

    /// Its index in its graph.
    pub fn index(&self) -> Result<usize> {
        let mut i = 0usize;
        check(unsafe { sys::cuabi_graph_node_index(&mut i, self.as_raw()) })?;
        Ok(i)
    }

    /// The nodes it depends on.
    pub fn dependencies(&self) -> Result<Vec<GraphNode>> {
        let mut n = 0usize;
        check(unsafe { sys::cuabi_graph_node_dependency_count(&mut n, self.as_raw()) })?;
        (0..n).map(|i| node_from(|o| unsafe { sys::cuabi_graph_node_dependency(o, self.as_raw(), i) })).collect()
    }

    /// The nodes that depend on it.
    pub fn dependents(&self) -> Result<Vec<GraphNode>> {
        let mut n = 0usize;
        check(unsafe { sys::cuabi_graph_node_dependent_count(&mut n, self.as_raw()) })?;
        (0..n).map(|i| node_from(|o| unsafe { sys::cuabi_graph_node_dependent(o, self.as_raw(), i) })).collect()
    }

    /// Change a kernel node (made by add_kernel) in the graph: the pack's
    /// current values and, unless None, a new grid, block and shared memory.
    pub fn set_kernel_params(&self, pack: &ArgPack, config: Option<&LaunchConfig>) -> Result<()> {
        let c = config.map(|c| c.to_c()).transpose()?;
        check(unsafe {
            sys::cuabi_graph_kernel_node_set(self.as_raw(), pack.as_raw(),
                                             c.as_ref().map_or(core::ptr::null(), |c| c as *const _))
        })
    }
}

/// An executable graph. Launch it from any thread; update it with `&mut`.
pub struct GraphExec<'h> {
    raw: GraphExecRaw,
    owned: Vec<Owned>,
    _host: Invariant<'h>,
}

impl core::fmt::Debug for GraphExec<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "GraphExec({:?})", self.raw)
    }
}

/// Why an update failed (`cuabi_graph_update_info`).
pub type UpdateInfo = sys::cuabi_graph_update_info;

impl<'h> GraphExec<'h> {
    /// The C handle.
    pub fn as_raw(&self) -> *mut sys::cuabi_graph_exec {
        self.raw.as_raw()
    }

    /// Run on `stream` (a stream of the graph's device).
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        check(unsafe { sys::cuabi_graph_exec_launch(self.as_raw(), stream.as_raw()) })
    }

    /// Upload ahead of the first launch.
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        check(unsafe { sys::cuabi_graph_exec_upload(self.as_raw(), stream.as_raw()) })
    }

    /// Update in place from a graph of the same topology. On failure the
    /// error names the node; `info` says why (result, node indices).
    pub fn update(&mut self, graph: &Graph<'h>) -> std::result::Result<(), (Error, UpdateInfo)> {
        let mut info = UpdateInfo::default();
        let st = unsafe { sys::cuabi_graph_update_info_init(&mut info, sys::CUABI_GRAPH_UPDATE_INFO_VERSION) };
        check(st).map_err(|e| (e, info))?;
        check(unsafe { sys::cuabi_graph_exec_update(self.as_raw(), graph.as_raw(), &mut info) })
            .map_err(|e| (e, info))?;
        self.owned.push(graph.owned.clone());
        Ok(())
    }

    /// New arguments (and, unless None, grid/block/shared memory) for one
    /// kernel node, without re-instantiating.
    pub fn update_kernel(&mut self, node: &GraphNode, pack: &ArgPack, config: Option<&LaunchConfig>) -> Result<()> {
        let c = config.map(|c| c.to_c()).transpose()?;
        check(unsafe {
            sys::cuabi_graph_exec_update_kernel(self.as_raw(), node.as_raw(), pack.as_raw(),
                                                c.as_ref().map_or(core::ptr::null(), |c| c as *const _))
        })
    }

    /// The CUgraphExec (owned by cuabi).
    pub fn raw_exec(&self) -> Result<usize> {
        let mut v = 0usize;
        check(unsafe { sys::cuabi_graph_exec_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }
}

impl Stream {
    /// Start recording the work queued on this stream into a graph.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        check(unsafe { sys::cuabi_graph_capture_begin(self.as_raw(), mode) })
    }

    /// End the capture and take its graph.
    pub fn end_capture<'h>(&self) -> Result<Graph<'h>> {
        Ok(Graph::from_raw_graph(GraphRaw::create(|o| unsafe { sys::cuabi_graph_capture_end(o, self.as_raw()) })?))
    }

    /// Capture what `f` queues on this stream. The capture is ended also
    /// when `f` fails (its error is returned; no graph is made).
    pub fn capture<'h, F: FnOnce(&Stream) -> Result<()>>(&self, mode: CaptureMode, f: F) -> Result<Graph<'h>> {
        self.begin_capture(mode)?;
        let r = f(self);
        let g = self.end_capture();
        r?;
        g
    }

    /// Whether this stream is being captured.
    pub fn capture_status(&self) -> Result<CaptureStatus> {
        let mut s = sys::cuabi_capture_status(0);
        check(unsafe { sys::cuabi_graph_capture_status(&mut s, self.as_raw()) })?;
        Ok(s)
    }
}
