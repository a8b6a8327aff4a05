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
//!
//! A launch returns before the graph runs, so an executable records an
//! event after each launch (one per stream, recorded again by the next
//! launch on it) and dropping it waits for them: the host memory it borrows,
//! the closures it owns and the buffers its nodes name are never freed under
//! a run still in flight. Nodes that launch kernels with an
//! [`ArgPack`] are `unsafe` to add, as [`launch`](crate::launch) is; so is
//! beginning a capture, whose graph replays whatever was captured after the
//! memory it names may be gone.
use std::any::Any;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use crate::enums::MemoryKind;

use crate::argpack::ArgPack;
use crate::device::Device;
use crate::error::{c_string, check, infallible, Error, Result};
use crate::event::Event;
use crate::launch::LaunchConfig;
use crate::memory::{Buffer, Pod};
use crate::objcode::Kernel;
use crate::stream::Stream;
use crate::sys;
use crate::view::View;

pub use crate::enums::{CaptureMode, CaptureStatus, ConditionalType, GraphNodeKind};

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

// SAFETY: graph.h: "Every function may be called from any thread; a graph's
// handles are safe to query from several threads at once and additions to
// one graph are serialised."
unsafe impl Send for GraphRaw {}
// SAFETY: as above.
unsafe impl Sync for GraphRaw {}
// SAFETY: as above (nodes are handles of a graph).
unsafe impl Send for GraphNode {}
// SAFETY: as above.
unsafe impl Sync for GraphNode {}
// SAFETY: graph.h: "Launching an executable while another thread updates it
// is the caller's race": launches take &self, updates &mut self.
unsafe impl Send for GraphExecRaw {}
// SAFETY: as above.
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
    // SAFETY: the payload is the boxed closure add_host leaked into the
    // graph's `owned` list, which the graph and its executables keep -- and an
    // executable's drop waits for its launches, so the box outlives every run.
    let f = unsafe { &*(payload as *const Box<dyn Fn() + Send + Sync>) };
    // A panic must not cross into the driver: record it and go on.
    crate::host::run_guarded("Graph::add_host", f);
}

impl<'h> Graph<'h> {
    /// An empty graph.
    pub fn new() -> Result<Graph<'h>> {
        // SAFETY: `o` is the out-pointer `create` hands us.
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
        // SAFETY: the graph is live; `v` a local.
        check(unsafe { sys::cuabi_graph_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }

    /// The graph's device: None while no node names one, or nodes name several.
    pub fn device(&self) -> Result<Option<Device>> {
        let mut d = core::ptr::null_mut();
        // SAFETY: the graph is live; `d` a local (a borrowed device).
        check(unsafe { sys::cuabi_graph_device(&mut d, self.as_raw()) })?;
        if d.is_null() {
            return Ok(None);
        }
        // SAFETY: `d` is a live device the graph keeps; retain takes our own reference.
        check(unsafe { sys::cuabi_device_retain(d) })?;
        // SAFETY: the reference just taken is ours.
        Ok(unsafe { Device::from_raw(d) })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        let mut n = 0usize;
        // SAFETY: the graph is live; `n` a local.
        infallible(unsafe { sys::cuabi_graph_node_count(&mut n, self.as_raw()) }, "cuabi_graph_node_count");
        n
    }
    /// Whether it has no nodes.
    pub fn is_empty(&self) -> bool {
        self.node_count() == 0
    }

    /// The node at `index` (in the order nodes were added, or captured).
    pub fn node(&self, index: usize) -> Result<GraphNode> {
        // SAFETY: the graph is live; the library checks `index`.
        node_from(|o| unsafe { sys::cuabi_graph_node_at(o, self.as_raw(), index) })
    }

    /// Every node.
    pub fn nodes(&self) -> Result<Vec<GraphNode>> {
        (0..self.node_count()).map(|i| self.node(i)).collect()
    }

    /// A kernel node: `kernel` with the pack's current values (copied now)
    /// and the configuration's grid, block, shared memory and attributes;
    /// the configuration's stream or device names the device.
    ///
    /// # Safety
    /// As [`launch`](crate::launch), for every run of every executable made
    /// from this graph: the values right for the kernel, the memory they name
    /// alive until the last run is done (the graph keeps the memory of the
    /// pack's `buffer` and `view` slots; a raw address is the caller's).
    pub unsafe fn add_kernel(&self, deps: &[&GraphNode], kernel: &Kernel, pack: &ArgPack,
                             config: &LaunchConfig) -> Result<GraphNode> {
        let c = config.to_c()?;
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the caller vouches for the values.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_kernel(o, self.as_raw(), d.as_mut_ptr(), d.len(), kernel.as_raw(),
                                        pack.as_raw(), &c)
        })
    }

    /// A copy of `size` bytes between buffers (the graph keeps both alive).
    /// The destination may not be plain host memory, which the copy would
    /// write on a driver thread while this one may read it: copy into a
    /// borrowed slice with [`Graph::add_memcpy_to_host`] instead.
    pub fn add_memcpy(&self, deps: &[&GraphNode], dst: &Buffer, dst_offset: usize, src: &Buffer,
                      src_offset: usize, size: usize) -> Result<GraphNode> {
        if dst.kind() == MemoryKind::Host {
            return Err(Error::invalid_argument(
                "Graph::add_memcpy: the destination is plain host memory, which a buffer shares \
                 with its readers; use add_memcpy_to_host with a borrowed slice"));
        }
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the library checks the ranges and
        // keeps both buffers' memory (graph.h: "A graph keeps alive everything
        // its nodes reference").
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
        // SAFETY: `src` is borrowed for 'h, as long as the graph and its
        // executables, whose drop waits for their runs (common.h: a graph's
        // host copy node reads it "whenever the graph runs").
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
        // SAFETY: `dst` is borrowed mutably for 'h (as add_memcpy_from_host):
        // nothing else reads or writes it until the last run is done.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memcpy_to_host(o, self.as_raw(), d.as_mut_ptr(), d.len(),
                                                dst.as_mut_ptr() as *mut c_void, src.as_raw(),
                                                src_offset, core::mem::size_of_val(dst))
        })
    }

    /// A copy between two contiguous views of the same size.
    pub fn add_memcpy_view(&self, deps: &[&GraphNode], dst: &View, src: &View) -> Result<GraphNode> {
        if dst.info().device_type == sys::kDLCPU {
            return Err(Error::invalid_argument(
                "Graph::add_memcpy_view: the destination is plain host memory, which views read \
                 directly; use add_memcpy_to_host with a borrowed slice"));
        }
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the graph keeps both views.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memcpy_view(o, self.as_raw(), d.as_mut_ptr(), d.len(), dst.as_raw(),
                                             src.as_raw())
        })
    }

    /// A memset of `count` elements of `width` bytes (1, 2, 4).
    pub fn add_memset(&self, deps: &[&GraphNode], buffer: &Buffer, offset: usize, value: u32,
                      width: u32, count: usize) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the library refuses plain host
        // memory and keeps the buffer's memory.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_memset(o, self.as_raw(), d.as_mut_ptr(), d.len(), buffer.as_raw(),
                                        offset, value, width, count)
        })
    }

    /// A host node running `f` on a driver thread (it must not call CUDA).
    /// The graph and its executables own the closure. A panic in it is
    /// caught and recorded ([`take_host_panics`](crate::take_host_panics)).
    /// (A host function queued on a stream being captured:
    /// [`Stream::launch_host_func_repeated`].)
    pub fn add_host<F: Fn() + Send + Sync + 'static>(&self, deps: &[&GraphNode], f: F) -> Result<GraphNode> {
        let boxed: Box<Box<dyn Fn() + Send + Sync>> = Box::new(Box::new(f));
        let payload = &*boxed as *const Box<dyn Fn() + Send + Sync> as *mut c_void;
        let mut d = deps_of(deps);
        // SAFETY: `run_host` reads the closure box, which the graph owns from
        // the next line on (and its executables, whose drop waits for runs);
        // the node is not run before this call returns.
        let node = node_from(|o| unsafe {
            sys::cuabi_graph_add_host(o, self.as_raw(), d.as_mut_ptr(), d.len(), Some(run_host), payload)
        })?;
        self.owned.lock().map_err(|_| Error::internal("graph lock poisoned"))?.push(boxed);
        Ok(node)
    }

    /// A memory allocation node: `size` bytes of device, pinned or managed
    /// memory owned by the graph, on `device`, with read-write access for
    /// `peers`. Its address is fixed now: [`GraphNode::mem_info`]. CUDA keeps
    /// every node and edge of a graph with memory nodes, and it cannot be a
    /// child graph.
    pub fn add_mem_alloc(&self, deps: &[&GraphNode], device: &Device, kind: impl Into<MemoryKind>,
                         size: usize, peers: &[&Device]) -> Result<GraphNode> {
        let kind: MemoryKind = kind.into();
        let mut d = deps_of(deps);
        let mut p: Vec<*mut sys::cuabi_device> = peers.iter().map(|x| x.as_raw()).collect();
        // SAFETY: handles live for the call; the library checks the rest.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_mem_alloc(o, self.as_raw(), d.as_mut_ptr(), d.len(), device.as_raw(),
                                           kind.to_raw(), size, p.as_mut_ptr(), p.len())
        })
    }

    /// A memory free node for `pointer`, an address an allocation node returned.
    ///
    /// # Safety
    /// Every node using the memory must run before this one (its
    /// dependencies), in this graph and in those launched with it.
    pub unsafe fn add_mem_free(&self, deps: &[&GraphNode], pointer: usize) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the driver refuses an address no
        // allocation node returned; the caller vouches for the order.
        node_from(|o| unsafe { sys::cuabi_graph_add_mem_free(o, self.as_raw(), d.as_mut_ptr(), d.len(), pointer) })
    }

    /// An empty node (a join point).
    pub fn add_empty(&self, deps: &[&GraphNode]) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call.
        node_from(|o| unsafe { sys::cuabi_graph_add_empty(o, self.as_raw(), d.as_mut_ptr(), d.len()) })
    }

    /// A node recording `event`.
    pub fn add_event_record(&self, deps: &[&GraphNode], event: &Event) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the graph keeps the event.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_event_record(o, self.as_raw(), d.as_mut_ptr(), d.len(), event.as_raw())
        })
    }

    /// A node waiting for `event`.
    pub fn add_event_wait(&self, deps: &[&GraphNode], event: &Event) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the graph keeps the event.
        node_from(|o| unsafe {
            sys::cuabi_graph_add_event_wait(o, self.as_raw(), d.as_mut_ptr(), d.len(), event.as_raw())
        })
    }

    /// A node running a copy of `child` (taken now).
    pub fn add_child(&self, deps: &[&GraphNode], child: &Graph<'h>) -> Result<GraphNode> {
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call; the child is copied, with 'h.
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
        // SAFETY: handles live for the call; `h` a local.
        check(unsafe {
            sys::cuabi_graph_conditional_handle_create(&mut h, self.as_raw(), device.as_raw(),
                                                       default.unwrap_or(0), flags)
        })?;
        Ok(h)
    }

    /// A conditional node with `bodies` body graphs (see [`Graph::add_while`]).
    pub fn add_conditional(&self, deps: &[&GraphNode], handle: u64, kind: impl Into<ConditionalType>,
                           bodies: u32) -> Result<(GraphNode, Vec<Graph<'h>>)> {
        let kind: ConditionalType = kind.into();
        let mut d = deps_of(deps);
        // SAFETY: handles live for the call.
        let node = node_from(|o| unsafe {
            sys::cuabi_graph_add_conditional(o, self.as_raw(), d.as_mut_ptr(), d.len(), handle, kind.to_raw(), bodies)
        })?;
        let graphs = (0..bodies)
            .map(|i| {
                // SAFETY: the node is live; the library checks `i`.
                let raw = GraphRaw::create(|o| unsafe { sys::cuabi_graph_node_body(o, node.as_raw(), i) })?;
                Ok(Graph { raw, owned: self.owned.clone(), _host: PhantomData })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((node, graphs))
    }

    /// A while node: its body runs while the handle is non-zero.
    pub fn add_while(&self, deps: &[&GraphNode], handle: u64) -> Result<(GraphNode, Graph<'h>)> {
        let (n, mut b) = self.add_conditional(deps, handle, ConditionalType::While, 1)?;
        Ok((n, b.remove(0)))
    }

    /// An if node: its body runs once when the handle is non-zero.
    pub fn add_if(&self, deps: &[&GraphNode], handle: u64) -> Result<(GraphNode, Graph<'h>)> {
        let (n, mut b) = self.add_conditional(deps, handle, ConditionalType::If, 1)?;
        Ok((n, b.remove(0)))
    }

    /// `to` runs after `from` for each pair (a cycle or an existing edge is refused).
    pub fn add_dependencies(&self, edges: &[(&GraphNode, &GraphNode)]) -> Result<()> {
        let mut from: Vec<_> = edges.iter().map(|e| e.0.as_raw()).collect();
        let mut to: Vec<_> = edges.iter().map(|e| e.1.as_raw()).collect();
        // SAFETY: handles live for the call; the arrays hold `edges.len()` each.
        check(unsafe { sys::cuabi_graph_add_dependencies(self.as_raw(), from.as_mut_ptr(), to.as_mut_ptr(), edges.len()) })
    }

    /// Remove the edges.
    pub fn remove_dependencies(&self, edges: &[(&GraphNode, &GraphNode)]) -> Result<()> {
        let mut from: Vec<_> = edges.iter().map(|e| e.0.as_raw()).collect();
        let mut to: Vec<_> = edges.iter().map(|e| e.1.as_raw()).collect();
        // SAFETY: as add_dependencies.
        check(unsafe { sys::cuabi_graph_remove_dependencies(self.as_raw(), from.as_mut_ptr(), to.as_mut_ptr(), edges.len()) })
    }

    /// The graph as Graphviz text.
    pub fn to_dot(&self, verbose: bool) -> Result<String> {
        let flags = if verbose { sys::CUABI_GRAPH_DOT_VERBOSE.0 as u32 } else { 0 };
        let mut size = 0usize;
        // SAFETY: a size query: no output buffer, `size` a local.
        let st = unsafe { sys::cuabi_graph_debug_dot_text(core::ptr::null_mut(), &mut size, self.as_raw(), flags) };
        if st != sys::CUABI_ERROR_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` holds `size` bytes, as `size` tells the call.
        check(unsafe { sys::cuabi_graph_debug_dot_text(buf.as_mut_ptr().cast(), &mut size, self.as_raw(), flags) })?;
        let text = CStr::from_bytes_until_nul(&buf).map_err(|_| Error::internal("dot text without NUL"))?;
        Ok(text.to_string_lossy().into_owned())
    }

    /// Write the Graphviz text to a file.
    pub fn debug_dot(&self, path: &str, verbose: bool) -> Result<()> {
        let p = c_string("path", path)?;
        let flags = if verbose { sys::CUABI_GRAPH_DOT_VERBOSE.0 as u32 } else { 0 };
        // SAFETY: the graph is live; `p` is read during the call.
        check(unsafe { sys::cuabi_graph_debug_dot(self.as_raw(), p.as_ptr(), flags) })
    }

    /// The executable. It keeps this graph (and what it keeps) alive.
    pub fn instantiate(&self) -> Result<GraphExec<'h>> {
        self.instantiate_with(&InstantiateOptions::default())
    }

    /// The executable, with flags (auto-free, upload, device launch, node priority).
    pub fn instantiate_with(&self, options: &InstantiateOptions) -> Result<GraphExec<'h>> {
        let mut o = sys::cuabi_graph_instantiate_options::default();
        // SAFETY: `o` is a local the init function fills.
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
        // SAFETY: the graph (and the upload stream) are live; `o` is read during the call.
        let raw = GraphExecRaw::create(|out| unsafe { sys::cuabi_graph_instantiate(out, self.as_raw(), &o) })?;
        Ok(GraphExec { runs: Runs::default(), raw, owned: vec![self.owned.clone()], _host: PhantomData })
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
    pub fn kind(&self) -> GraphNodeKind {
        let mut k = sys::cuabi_graph_node_kind(0);
        // SAFETY: the node is live; `k` a local.
        infallible(unsafe { sys::cuabi_graph_node_type(&mut k, self.as_raw()) }, "cuabi_graph_node_type");
        k.into()
    }

    /// Its index in its graph.
    pub fn index(&self) -> usize {
        let mut i = 0usize;
        // SAFETY: the node is live; `i` a local.
        infallible(unsafe { sys::cuabi_graph_node_index(&mut i, self.as_raw()) }, "cuabi_graph_node_index");
        i
    }

    /// A memory allocation node's address and size, or a free node's address
    /// and 0; an error for other kinds.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        let (mut p, mut n) = (0usize, 0usize);
        // SAFETY: the node is live; `p` and `n` locals.
        check(unsafe { sys::cuabi_graph_node_mem_info(&mut p, &mut n, self.as_raw()) })?;
        Ok((p, n))
    }

    /// The nodes it depends on.
    pub fn dependencies(&self) -> Result<Vec<GraphNode>> {
        let mut n = 0usize;
        // SAFETY: the node is live; `n` a local.
        check(unsafe { sys::cuabi_graph_node_dependency_count(&mut n, self.as_raw()) })?;
        // SAFETY: the node is live; the library checks `i`.
        (0..n).map(|i| node_from(|o| unsafe { sys::cuabi_graph_node_dependency(o, self.as_raw(), i) })).collect()
    }

    /// The nodes that depend on it.
    pub fn dependents(&self) -> Result<Vec<GraphNode>> {
        let mut n = 0usize;
        // SAFETY: the node is live; `n` a local.
        check(unsafe { sys::cuabi_graph_node_dependent_count(&mut n, self.as_raw()) })?;
        // SAFETY: the node is live; the library checks `i`.
        (0..n).map(|i| node_from(|o| unsafe { sys::cuabi_graph_node_dependent(o, self.as_raw(), i) })).collect()
    }

    /// Change a kernel node (made by add_kernel) in the graph: the pack's
    /// current values and, unless None, a new grid, block and shared memory.
    ///
    /// # Safety
    /// As [`Graph::add_kernel`].
    pub unsafe fn set_kernel_params(&self, pack: &ArgPack, config: Option<&LaunchConfig>) -> Result<()> {
        let c = config.map(|c| c.to_c()).transpose()?;
        // SAFETY: handles live for the call; the caller vouches for the values.
        check(unsafe {
            sys::cuabi_graph_kernel_node_set(self.as_raw(), pack.as_raw(),
                                             c.as_ref().map_or(core::ptr::null(), |c| c as *const _))
        })
    }
}

/// An executable graph. Launch it from any thread; update it with `&mut`.
/// Dropping it waits for the runs launched from it (see the module docs).
pub struct GraphExec<'h> {
    // Dropped first: waits for the runs in flight.
    runs: Runs,
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

    /// Run on `stream` (a stream of the graph's device). The executable
    /// records an event after the run; dropping it waits for the last one of
    /// each stream.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        // SAFETY: handles live for the call; what the nodes touch stays alive
        // until the run is done: the C side keeps handles' memory, the
        // borrow 'h and the owned closures last until `runs` is waited for.
        let st = unsafe { sys::cuabi_graph_exec_launch(self.as_raw(), stream.as_raw()) };
        crate::host::forget_last_run();
        check(st)?;
        self.runs.launched(stream)
    }

    /// Block until every run launched from this executable is done.
    pub fn synchronize(&self) -> Result<()> {
        self.runs.wait()
    }

    /// Upload ahead of the first launch.
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        // SAFETY: handles live for the call.
        check(unsafe { sys::cuabi_graph_exec_upload(self.as_raw(), stream.as_raw()) })
    }

    /// Update in place from a graph of the same topology. On failure the
    /// error names the node; `info` says why (result, node indices).
    pub fn update(&mut self, graph: &Graph<'h>) -> std::result::Result<(), (Error, UpdateInfo)> {
        let mut info = UpdateInfo::default();
        // SAFETY: `info` is a local the init function fills.
        let st = unsafe { sys::cuabi_graph_update_info_init(&mut info, sys::CUABI_GRAPH_UPDATE_INFO_VERSION) };
        check(st).map_err(|e| (e, info))?;
        // SAFETY: handles live; `&mut self` excludes launches on other threads
        // (graph.h: updating while launching is the caller's race).
        check(unsafe { sys::cuabi_graph_exec_update(self.as_raw(), graph.as_raw(), &mut info) })
            .map_err(|e| (e, info))?;
        self.owned.push(graph.owned.clone());
        Ok(())
    }

    /// New arguments (and, unless None, grid/block/shared memory) for one
    /// kernel node, without re-instantiating.
    ///
    /// # Safety
    /// As [`Graph::add_kernel`], for every later run of this executable.
    pub unsafe fn update_kernel(&mut self, node: &GraphNode, pack: &ArgPack, config: Option<&LaunchConfig>) -> Result<()> {
        let c = config.map(|c| c.to_c()).transpose()?;
        // SAFETY: handles live; `&mut self` excludes launches; the caller
        // vouches for the values.
        check(unsafe {
            sys::cuabi_graph_exec_update_kernel(self.as_raw(), node.as_raw(), pack.as_raw(),
                                                c.as_ref().map_or(core::ptr::null(), |c| c as *const _))
        })
    }

    /// The CUgraphExec (owned by cuabi).
    pub fn raw_exec(&self) -> Result<usize> {
        let mut v = 0usize;
        // SAFETY: the executable is live; `v` a local.
        check(unsafe { sys::cuabi_graph_exec_raw(&mut v, self.as_raw()) })?;
        Ok(v)
    }
}

impl Stream {
    /// Start recording the work queued on this stream into a graph.
    ///
    /// # Safety
    /// Captured work does not run now but at every launch of an executable
    /// made from the graph, after this call's borrows are over: every piece
    /// of memory the captured work names (device slices and buffers of safe
    /// launches and copies on this stream, and on streams that join the
    /// capture through events) must stay allocated, and free of conflicting
    /// use, for every run of those executables. The stream-ordered tracking
    /// of [`DeviceSlice`](crate::DeviceSlice) sees the capture, not the runs.
    pub unsafe fn begin_capture(&self, mode: impl Into<CaptureMode>) -> Result<()> {
        // SAFETY: the stream is live; the caller's contract covers the graph.
        check(unsafe { sys::cuabi_graph_capture_begin(self.as_raw(), mode.into().to_raw()) })
    }

    /// End the capture and take its graph.
    pub fn end_capture<'h>(&self) -> Result<Graph<'h>> {
        // SAFETY: the stream is live; `o` is the out-pointer.
        Ok(Graph::from_raw_graph(GraphRaw::create(|o| unsafe { sys::cuabi_graph_capture_end(o, self.as_raw()) })?))
    }

    /// Capture what `f` queues on this stream. The capture is ended also
    /// when `f` fails (its error is returned; no graph is made).
    ///
    /// # Safety
    /// As [`Stream::begin_capture`].
    pub unsafe fn capture<'h, F: FnOnce(&Stream) -> Result<()>>(&self, mode: impl Into<CaptureMode>, f: F) -> Result<Graph<'h>> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.begin_capture(mode)? };
        let r = f(self);
        let g = self.end_capture();
        r?;
        g
    }

    /// Whether this stream is being captured.
    pub fn capture_status(&self) -> Result<CaptureStatus> {
        let mut s = sys::cuabi_capture_status(0);
        // SAFETY: the stream is live; `s` a local.
        check(unsafe { sys::cuabi_graph_capture_status(&mut s, self.as_raw()) })?;
        Ok(s.into())
    }
}

/// The last run launched on each stream, to wait for (see [`GraphExec`]).
#[derive(Default)]
/// The stream is kept (a reference) so that its handle is not reused by
/// another stream while its entry stands.
struct Runs(Mutex<Vec<(Stream, Event)>>);

impl Runs {
    fn launched(&self, stream: &Stream) -> Result<()> {
        let r = self.record(stream);
        if r.is_err() {
            // No event to be had: wait for the run now rather than let what
            // it uses go under it.
            let _ = stream.synchronize();
        }
        r
    }

    fn record(&self, stream: &Stream) -> Result<()> {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, e)) = v.iter().find(|(s, _)| s.as_raw() == stream.as_raw()) {
            // A later run on the same stream ends after the earlier ones.
            return e.record(stream);
        }
        let e = Event::with_flags(&stream.device()?, sys::CUABI_EVENT_DISABLE_TIMING)?;
        e.record(stream)?;
        v.push((stream.clone(), e));
        Ok(())
    }

    fn wait(&self) -> Result<()> {
        let v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.iter().try_for_each(|(_, e)| e.synchronize())
    }
}

impl Drop for Runs {
    fn drop(&mut self) {
        // Nothing better to do with an error (a broken context) than go on.
        let _ = self.wait();
    }
}
