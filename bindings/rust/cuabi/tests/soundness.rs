//! Issue 28: what the safe API must refuse at run time, against the C
//! tests' fake driver (tests/fixtures/fake_cuda_graph.c, CUABI_TEST_FAKE_CUDA,
//! set by tests/bindings/check_rust.sh): no GPU needed. The fake runs the
//! kernels `rsfake_axpy` and `rsfake_pset` on the host at launch (device
//! memory is host memory there), so results are checked too. The compile-time
//! half (what must not compile) is the `compile_fail` doctests of lib.rs.
//! Each test prints SKIP and returns without the fake.
use std::sync::Once;

use cuabi::{
    sys, ArgKind, Buffer, CodeType, DType, Device, DeviceRepr, Graph, LaunchConfig, MemoryKind,
    MemoryResource, Program, ProgramOptions, Status, Stream, View,
};

const SRC: &str = r#"
struct P { int a; int b; };
struct Q { int a; int b; };
__global__ void rsfake_axpy(long long *y, const long long *x, long long a) {}
__global__ void rsfake_pset(P p, long long *out, long long n) {}
__global__ void rsfake_qset(Q q, long long *out, long long n) {}
__global__ void rsfake_any(void *p, const void *q, long long n) {}
__global__ void rsfake_pp(long long **p, long long a, long long b) {}
extern "C" __global__ void add_i64(long long *o, const long long *i, unsigned long long n) {}
"#;

static INIT: Once = Once::new();

fn fake() -> Option<Device> {
    let Ok(path) = std::env::var("CUABI_TEST_FAKE_CUDA") else {
        eprintln!("SKIP: CUABI_TEST_FAKE_CUDA not set (tests/bindings/check_rust.sh sets it)");
        return None;
    };
    // SAFETY: every test calls this before any other cuabi call, and the
    // variable is set once, before the library first loads the driver.
    INIT.call_once(|| unsafe { std::env::set_var("CUABI_DRIVER_PATH", path) });
    Some(Device::get(0).expect("fake device 0"))
}

fn code() -> cuabi::ObjectCode {
    let mut p = Program::new(SRC, Some("soundness.cu")).unwrap();
    let o = ProgramOptions::new().arch("sm_90").name_expression("rsfake_axpy").name_expression("rsfake_pset")
        .name_expression("rsfake_qset").name_expression("rsfake_any").name_expression("rsfake_pp");
    p.compile(&o).unwrap()
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct P {
    a: i32,
    b: i32,
}
// SAFETY: `struct P { int a; int b; }` of SRC: two 4-byte ints, no padding.
unsafe impl DeviceRepr for P {
    const KIND: ArgKind = ArgKind::Raw;
    const CXX_NAMES: &'static [&'static str] = &["P"];
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Big {
    a: i64,
    b: i64,
}
// SAFETY: never launched: only to show the size check refuses it.
unsafe impl DeviceRepr for Big {
    const KIND: ArgKind = ArgKind::Raw;
    const CXX_NAMES: &'static [&'static str] = &["P"];
}

fn mismatch(r: cuabi::Result<()>, needle: &str) {
    let e = r.expect_err("the launch was accepted");
    assert_eq!(e.status, Status::ArgumentMismatch, "{e}");
    assert!(e.message.contains(needle), "{needle:?} not in: {}", e.message);
}

/// Deliver item 2: safe launches with wrong arguments are refused by kind,
/// not only by size; a right one runs, and its result is there.
#[test]
fn safe_launch_checks_kinds() {
    let Some(dev) = fake() else { return };
    let code = code();
    let axpy = code.kernel("rsfake_axpy").unwrap();
    assert_eq!(axpy.name(), "_Z11rsfake_axpyPxPKxx");
    assert_eq!(axpy.signature().unwrap(), "long long*, long long const*, long long");
    let s = Stream::new(&dev).unwrap();
    let x = s.clone_htod(&[1i64, 2, 3, 4]).unwrap();
    let mut y = s.clone_htod(&[10i64, 20, 30, 40]).unwrap();
    let cfg = LaunchConfig::new(4, 1);
    s.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&3i64).launch(cfg).unwrap();
    assert_eq!(s.clone_dtoh(&y).unwrap(), vec![13, 26, 39, 52]);

    // A read-only slice for a pointer the kernel may write.
    mismatch(s.launch_builder(&axpy).arg(&y).arg(&x).arg(&3i64).launch(cfg), "may write");
    // A float, a 4-byte int and an unsigned for `long long`.
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&3.0f64).launch(cfg), "parameter 2");
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&3i32).launch(cfg), "parameter 2");
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&3u64).launch(cfg), "parameter 2");
    // Slices of another element type.
    let mut f = s.alloc_zeros::<f64>(4).unwrap();
    mismatch(s.launch_builder(&axpy).arg(&mut f).arg(&x).arg(&3i64).launch(cfg), "parameter 0");
    let xs = s.alloc_zeros::<u64>(4).unwrap();
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&xs).arg(&3i64).launch(cfg), "parameter 1");
    // A value where a pointer goes, a slice where a value goes.
    mismatch(s.launch_builder(&axpy).arg(&5i64).arg(&x).arg(&3i64).launch(cfg), "parameter 0");
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&x).launch(cfg), "parameter 2");
    // Too few and too many.
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&x).launch(cfg), "2 arguments for 3");
    mismatch(s.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&3i64).arg(&3i64).launch(cfg), "4 arguments");
    // None of these ran.
    assert_eq!(s.clone_dtoh(&y).unwrap(), vec![13, 26, 39, 52]);

    // Sub-slices: only the first two elements, through views.
    let mut yv = y.slice_mut(0..2).unwrap();
    s.launch_builder(&axpy).arg(&mut yv).arg(&x.slice(2..).unwrap()).arg(&1i64)
        .launch(LaunchConfig::new(2, 1)).unwrap();
    assert_eq!(s.clone_dtoh(&y).unwrap(), vec![16, 30, 39, 52]);
    assert!(y.slice(3..9).is_err(), "out of bounds");
}

/// Structs by value: a `DeviceRepr` of the parameter's C++ name and size.
#[test]
fn safe_launch_checks_structs_and_void_pointers() {
    let Some(dev) = fake() else { return };
    let code = code();
    let pset = code.kernel("rsfake_pset").unwrap();
    let s = Stream::new(&dev).unwrap();
    let mut out = s.alloc_zeros::<i64>(3).unwrap();
    s.launch_builder(&pset).arg(&P { a: 4, b: 2 }).arg(&mut out).arg(&3i64)
        .launch(LaunchConfig::new(1, 1)).unwrap();
    assert_eq!(s.clone_dtoh(&out).unwrap(), vec![4002; 3]);
    // A struct of another name (Q) and one of the right name but the wrong size.
    let qset = code.kernel("rsfake_qset").unwrap();
    mismatch(s.launch_builder(&qset).arg(&P { a: 1, b: 1 }).arg(&mut out).arg(&3i64)
        .launch(LaunchConfig::new(1, 1)), "`Q`");
    mismatch(s.launch_builder(&pset).arg(&Big { a: 1, b: 1 }).arg(&mut out).arg(&3i64)
        .launch(LaunchConfig::new(1, 1)), "16 bytes");
    // void pointers take any slice, writable ones only `&mut`.
    let any = code.kernel("rsfake_any").unwrap();
    let c = s.alloc_zeros::<f32>(2).unwrap();
    assert!(s.launch_builder(&any).arg(&mut out).arg(&c).arg(&1i64).launch(LaunchConfig::new(1, 1)).is_ok());
    mismatch(s.launch_builder(&any).arg(&out).arg(&c).arg(&1i64).launch(LaunchConfig::new(1, 1)), "may write");
    // A pointer to pointers: no slice stands for it.
    let pp = code.kernel("rsfake_pp").unwrap();
    mismatch(s.launch_builder(&pp).arg(&mut out).arg(&1i64).arg(&1i64).launch(LaunchConfig::new(1, 1)),
             "no slice type");
}

/// An extern "C" kernel's PTX `.u64` may be a pointer or an integer: the
/// safe launch refuses it and says what to do; the unsafe one runs it.
#[test]
fn extern_c_kernels_need_the_unsafe_launch() {
    let Some(dev) = fake() else { return };
    let add = code().kernel("add_i64").unwrap();
    let s = Stream::new(&dev).unwrap();
    let mut out = s.alloc_zeros::<i64>(1).unwrap();
    let input = s.clone_htod(&[1i64, 2, 3]).unwrap();
    let e = s.launch_builder(&add).arg(&mut out).arg(&input).arg(&3u64).launch(LaunchConfig::new(1, 1))
        .unwrap_err();
    assert_eq!(e.status, Status::ArgumentMismatch);
    assert!(e.message.contains("extern \"C\"") && e.message.contains("launch_unchecked"), "{e}");
    // SAFETY: add_i64(out, in, n) reads n = 3 values of `input` and writes out[0].
    unsafe { s.launch_builder(&add).arg(&mut out).arg(&input).arg(&3u64).launch_unchecked(LaunchConfig::new(1, 1)) }
        .unwrap();
    assert_eq!(s.clone_dtoh(&out).unwrap(), vec![6]);
    // Even unchecked, a size that differs from the parameter's is refused
    // (the pack's storage would be overrun).
    // SAFETY: refused before anything runs.
    let e = unsafe { s.launch_builder(&add).arg(&mut out).arg(&input).arg(&3u32).launch_unchecked(LaunchConfig::new(1, 1)) }
        .unwrap_err();
    assert!(e.message.contains("has 8 bytes"), "{e}");
}

/// Deliver item 4: a slice used on another stream records an event; the
/// uses are ordered (a foreign use waits for the home stream's earlier work),
/// and a write on the home stream, which waited for every foreign use,
/// forgets them.
#[test]
fn slices_track_other_streams() {
    let Some(dev) = fake() else { return };
    let axpy = code().kernel("rsfake_axpy").unwrap();
    let home = Stream::new(&dev).unwrap();
    let other = Stream::new(&dev).unwrap();
    let x = home.clone_htod(&[1i64, 1]).unwrap();
    let mut y = home.alloc_zeros::<i64>(2).unwrap();
    home.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&2i64).launch(LaunchConfig::new(2, 1)).unwrap();
    assert_eq!((x.pending_events(), y.pending_events()), (0, 0), "home-stream work needs no events");
    other.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&5i64).launch(LaunchConfig::new(2, 1)).unwrap();
    assert_eq!(y.pending_events(), 1, "the foreign write");
    assert_eq!(x.pending_events(), 2, "the home work before it, and the foreign read");
    assert_eq!(other.clone_dtoh(&y).unwrap(), vec![7, 7]);
    home.launch_builder(&axpy).arg(&mut y).arg(&x).arg(&1i64).launch(LaunchConfig::new(2, 1)).unwrap();
    assert_eq!(y.pending_events(), 0, "a home write waited for everything");
    assert_eq!(home.clone_dtoh(&y).unwrap(), vec![8, 8]);
    // Dropping with foreign uses pending: the home stream waits for them (no error, no block).
    let z = home.clone_htod(&[0i64; 2]).unwrap();
    other.launch_builder(&axpy).arg(&mut y).arg(&z).arg(&1i64).launch(LaunchConfig::new(2, 1)).unwrap();
    assert_eq!(z.pending_events(), 2);
    drop(z);
    drop(y);
    home.synchronize().unwrap();
    // Copies on another stream are uses too.
    let mut w = home.alloc_zeros::<u32>(3).unwrap();
    other.memcpy_htod(&[1u32, 2, 3], &mut w).unwrap();
    assert_eq!(w.pending_events(), 1);
    assert_eq!(home.clone_dtoh(&w).unwrap(), vec![1, 2, 3]);
    let mut w2 = other.alloc_zeros::<u32>(3).unwrap();
    home.memcpy_dtod(&w, &mut w2).unwrap();
    assert_eq!(other.clone_dtoh(&w2).unwrap(), vec![1, 2, 3]);
    other.memset_zeros(&mut w2).unwrap();
    assert_eq!(other.clone_dtoh(&w2).unwrap(), vec![0, 0, 0]);
    assert!(home.memcpy_htod(&[1u32], &mut w).is_err(), "length mismatch");
}

/// Deliver item 3: a buffer's writes take `&mut self`, and a write to host
/// memory is refused while a view made from the buffer -- or a slice, clone,
/// export or tensor map of that view -- may read it.
#[test]
fn buffer_writes_wait_for_views() {
    let mut buf = Buffer::from_vec(vec![0u32; 8]).unwrap();
    buf.copy_from_host(0, &[1u32, 2]).unwrap();
    let v = View::new(&buf, 0, DType::U32, &[8], None, 0).unwrap();
    let e = buf.copy_from_host(0, &[5u32]).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("view(s) made from this buffer"), "{e}");
    assert!(buf.memset(0, 0, 4, 1, None).is_err());
    let part = v.slice(&[2], &[4], None).unwrap();
    let export = v.to_dlpack_versioned().unwrap();
    drop(v);
    assert!(buf.copy_from_host(0, &[5u32]).is_err(), "the slice and the export still read it");
    drop(part);
    let again = View::from_dlpack_versioned(export).unwrap();
    assert!(buf.copy_from_host(0, &[5u32]).is_err(), "the view imported from the export");
    assert_eq!(again.to_vec::<u32>().unwrap()[..3], [1, 2, 0]);
    drop(again);
    buf.copy_from_host(0, &[5u32]).unwrap();
    assert_eq!(buf.to_vec::<u32>().unwrap()[..2], [5, 2]);
    // A reader on another thread and a writer on this one is a compile error
    // (lib.rs); the buffer is shared read-only across threads:
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| assert_eq!(buf.to_vec::<u32>().unwrap()[0], 5));
        }
    });
}

/// Device memory: views do not stop writes (no host code reads it directly).
#[test]
fn device_buffer_views_do_not_block_writes() {
    let Some(dev) = fake() else { return };
    let res = MemoryResource::device_default(&dev).unwrap();
    assert!(res.is_stream_ordered());
    let mut b = res.allocate(16, 0, None).unwrap();
    assert_eq!(b.kind(), MemoryKind::Device);
    let v = View::new(&b, 0, DType::I32, &[4], None, 0).unwrap();
    b.copy_from_host(0, &[1i32, 2, 3, 4]).unwrap();
    drop(v);
    // A copy queued on another stream than the allocation's is tracked.
    let s = Stream::new(&dev).unwrap();
    let mut c = res.allocate(16, 0, None).unwrap();
    c.copy_from(0, &b, 0, 16, Some(&s)).unwrap();
    assert_eq!((c.pending_uses(), b.pending_uses()), (1, 1));
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(c.pending_uses(), 0, "a synchronous read waited for it");
    drop(b);
}

/// Deliver item 1: an executable's drop waits for its runs, so host memory
/// and closures it uses outlive them; plain host buffers cannot be graph
/// copy destinations (their readers would race the driver thread).
#[test]
fn graph_exec_waits_and_host_destinations_are_refused() {
    let Some(dev) = fake() else { return };
    let res = MemoryResource::device_default(&dev).unwrap();
    let s = Stream::new(&dev).unwrap();
    let mut src = res.allocate(8, 0, None).unwrap();
    src.copy_from_host(0, &[42i64]).unwrap();
    let mut host = [0i64];
    {
        let g = Graph::new().unwrap();
        g.add_memcpy_to_host(&[], &mut host, &src, 0).unwrap();
        let exe = g.instantiate().unwrap();
        drop(g);
        exe.launch(&s).unwrap();
        exe.launch(&s).unwrap();
        exe.synchronize().unwrap();
        // drop(exe): waits for the runs (here already done)
    }
    assert_eq!(host, [42]);
    let hostbuf = Buffer::from_vec(vec![0i64]).unwrap();
    let g = Graph::new().unwrap();
    let e = g.add_memcpy(&[], &hostbuf, 0, &src, 0, 8).unwrap_err();
    assert!(e.message.contains("add_memcpy_to_host"), "{e}");
    let hv = View::new(&hostbuf, 0, DType::I64, &[1], None, 0).unwrap();
    let sv = View::new(&src, 0, DType::I64, &[1], None, 0).unwrap();
    assert!(g.add_memcpy_view(&[], &hv, &sv).is_err());
    assert!(g.add_memcpy_view(&[], &sv, &sv).is_ok());
}

/// Deliver item 3: errors are matchable enums; code types and the rest are
/// Rust enums that compare with the C values.
#[test]
fn errors_and_enums_are_rust_enums() {
    let e = cuabi::struct_size("cuabi_nope").unwrap_err();
    match e.status {
        Status::NotFound => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(e.raw_status(), sys::CUABI_ERROR_NOT_FOUND);
    assert_eq!(e.status_name(), "CUABI_ERROR_NOT_FOUND");
    // Every status the C library knows has its variant.
    for v in 1..200 {
        let raw = sys::cuabi_status(v);
        if raw.name().is_some() {
            assert!(!matches!(Status::from_raw(raw), Status::Unknown(_)), "{raw:?} has no variant");
            assert_eq!(Status::from_raw(raw).to_raw(), raw);
        }
    }
    assert_eq!(Status::from_raw(sys::cuabi_status(12345)), Status::Unknown(12345));
    assert_eq!(CodeType::from(sys::CUABI_CODE_PTX), CodeType::Ptx);
    assert_eq!(sys::cuabi_code_type::from(CodeType::Cubin), sys::CUABI_CODE_CUBIN);
    assert!(CodeType::Cubin == sys::CUABI_CODE_CUBIN);
    assert!(MemoryKind::Pinned.host_accessible() && !MemoryKind::Device.host_accessible());
    // Getters that cannot fail return values.
    let b = Buffer::from_vec(vec![0u8; 3]).unwrap();
    assert_eq!((b.size(), b.kind(), b.is_empty()), (3, MemoryKind::Host, false));
    let v = View::from_vec(vec![1i16, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    assert_eq!((v.shape(), v.len(), v.ndim(), v.dtype()), (&[2i64, 3][..], 6, 2, DType::I16));
    let p = cuabi::ArgPack::new("i32, f32").unwrap();
    assert_eq!((p.len(), p.is_empty()), (2, false));
    assert_eq!(p.slot_kind(1).unwrap(), ArgKind::F32);
}
