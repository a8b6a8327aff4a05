//! Launch overhead of the safe Rust path against the C `cuabi_launch` of the
//! same kernel (issue 28: the safe path must cost at most 1.05x the C one).
//!
//! The kernel is the empty `__global__ void k(float *p, int n, float s)` of
//! bench/bench_launch.c, compiled as C++ (its mangled name types the
//! parameters, so the safe launch checks them), launched on a created stream:
//!
//!   c      `sys::cuabi_launch(kernel, pack, &config)`: the C function with a
//!          pack "ptr, i32, f32" made once -- what bench/bench_launch.c's
//!          "cuabi_launch, created stream" row does (the call from Rust is
//!          the call from C; bench/bench_launch_cxx.c is the C twin, run in
//!          its own processes by bench/bench_rust_launch.sh);
//!   safe   `stream.launch_builder(&k).arg(&mut p).arg(&n).arg(&s).launch(cfg)`
//!          with a `DeviceSlice<f32>`: builder, kind checks, packing, launch;
//!   unsafe `cuabi::launch(&k, &pack, &cfg)`: the Rust wrapper of the C call.
//!
//! Many short blocks, every mode once per block in a rotating order, the
//! stream drained before each; each row prints the best and median block in
//! microseconds per launch and the median over blocks of the block's ratio to
//! `c` in the same block (docs/PERFORMANCE.md's method). The last line,
//! `safe/c median ratio: R`, is what bench/bench_rust_launch.sh collects.
//!
//! With `--only MODE` (c, safe or unsafe) the process times that one mode
//! alone, in the C twin's exact structure (warm-up launch of that mode;
//! per block: drain the stream, time `launches` launches; nothing else in
//! the process), and prints `MODE median us: X`: the figure to set beside
//! the C twin's `c median us` across processes.
//!
//!   bench_launch [launches per block (2000)] [blocks (101)] [--only MODE]
//!
//! Without a GPU it says so and exits 0.
use std::time::Instant;

use cuabi::{sys, ArgPack, Device, LaunchConfig, Program, ProgramOptions, Stream};

const SRC: &str = "__global__ void k(float *p, int n, float s) {}\n";

fn main() -> cuabi::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000).max(1);
    let blocks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(101).max(1);
    let only = match (args.next().as_deref(), args.next().as_deref()) {
        (None, _) => None,
        (Some("--only"), Some("c")) => Some(0),
        (Some("--only"), Some("safe")) => Some(1),
        (Some("--only"), Some("unsafe")) => Some(2),
        _ => {
            eprintln!("usage: bench_launch [launches per block] [blocks] [--only c|safe|unsafe]");
            std::process::exit(2);
        }
    };
    match cuabi::device_count() {
        Ok(d) if d > 0 => {}
        Ok(_) => {
            println!("bench_launch: no GPU (0 devices); nothing measured");
            return Ok(());
        }
        Err(e) => {
            println!("bench_launch: no GPU ({}); nothing measured", e.message);
            return Ok(());
        }
    }
    let dev = Device::get(0)?;
    let mut prog = Program::new(SRC, Some("empty.cu"))?;
    let code = prog.compile(&ProgramOptions::new().name_expression("k"))?;
    let k = code.kernel("k")?;
    let stream = Stream::new(&dev)?;
    let mut p = stream.alloc_zeros::<f32>(1)?;
    let (count, scale) = (1000i32, 2.0f32);
    let cfg = LaunchConfig::new(1, 32).on_stream(&stream);

    // The C twin's pack: "ptr, i32, f32", the pointer at the same one float.
    let mut pack = ArgPack::new("ptr, i32, f32")?;
    pack.set(0, &cuabi::DevicePtr(p.device_ptr()))?;
    pack.set(1, &count)?;
    pack.set(2, &scale)?;
    let ccfg = cfg.to_c()?;

    // One block of `n` launches of mode `m` (the stream drained first), in
    // microseconds per launch.
    let mut block = |m: usize, n: usize| -> cuabi::Result<f64> {
        stream.synchronize()?;
        let t0 = Instant::now();
        match m {
            0 => {
                for _ in 0..n {
                    // SAFETY: the pack holds the address of one float and two
                    // values for an empty kernel that reads nothing.
                    let st = unsafe { sys::cuabi_launch(k.as_raw(), pack.as_raw(), &ccfg) };
                    if st != sys::CUABI_SUCCESS {
                        return Err(cuabi::Error::from_status(st));
                    }
                }
            }
            1 => {
                for _ in 0..n {
                    stream.launch_builder(&k).arg(&mut p).arg(&count).arg(&scale).launch(cfg)?;
                }
            }
            _ => {
                for _ in 0..n {
                    // SAFETY: as mode 0.
                    unsafe { cuabi::launch(&k, &pack, &cfg) }?;
                }
            }
        }
        Ok(t0.elapsed().as_secs_f64() / n as f64 * 1e6)
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    const MODES: usize = 3;
    let names = ["c: sys::cuabi_launch", "safe: launch_builder", "unsafe: cuabi::launch"];
    let keys = ["c", "safe", "unsafe"];

    if let Some(m) = only {
        // The C twin's structure: one warm-up launch of this mode, drained,
        // then blocks of this mode alone.
        block(m, 1)?;
        let mut times = Vec::with_capacity(blocks);
        for _ in 0..blocks {
            times.push(block(m, n)?);
        }
        stream.synchronize()?;
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        println!("launch overhead, empty kernel k(float*, int, float) (C++), created stream, \
                  {blocks} blocks of {n} launches, {} only", keys[m]);
        println!("  {:<28} {best:>9.3} best us {:>9.3} median us", names[m], median(times.clone()));
        println!("{} median us: {:.4}", keys[m], median(times));
        return Ok(());
    }

    // Warm up every path (and the safe path's per-kernel pack).
    for m in 0..MODES {
        block(m, 1)?;
    }
    let mut times = vec![[0f64; MODES]; blocks];
    for (b, row) in times.iter_mut().enumerate() {
        for j in 0..MODES {
            let m = (j + b) % MODES;
            row[m] = block(m, n)?;
        }
    }
    stream.synchronize()?;
    println!("launch overhead, empty kernel k(float*, int, float) (C++), created stream, \
              {blocks} interleaved blocks of {n} launches");
    println!("  {:<28} {:>9} {:>9} {:>12}", "", "best us", "median us", "median ratio");
    let mut safe_ratio = 0.0;
    for m in 0..MODES {
        let best = times.iter().map(|r| r[m]).fold(f64::INFINITY, f64::min);
        let med = median(times.iter().map(|r| r[m]).collect());
        let ratio = median(times.iter().map(|r| r[m] / r[0]).collect());
        if m == 1 {
            safe_ratio = ratio;
        }
        println!("  {:<28} {:>9.3} {:>9.3} {:>12.3}", names[m], best, med, ratio);
    }
    println!("safe/c median ratio: {safe_ratio:.3}");
    Ok(())
}
