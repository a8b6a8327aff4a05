//! Segmented reduction: sum each segment of a vector, segments given by
//! offsets (CSR style). `cargo run --offline --example segmented_reduction`.
//!
//! The template kernel is instantiated through the name expression
//! `segred<float, 256>`, its resources and offline occupancy for sm_90 are
//! printed (no GPU needed), and with a GPU it is launched on [1..12] in 3
//! segments (→ [10, 26, 42]) and on a large random case, checked on the host.
use cuabi::{occupancy, ArgPack, Device, Event, LaunchConfig, MemoryResource, Program, ProgramOptions, Stream};

/// The CUDA C++ kernel: one block per segment.
pub const KERNEL: &str = r#"
template <typename T, int BLOCK>
__global__ void segred(const T *in, const int *off, T *out, int segs) {
  __shared__ T part[BLOCK];
  int s = blockIdx.x; if (s >= segs) return;
  T acc = 0;
  for (int i = off[s] + threadIdx.x; i < off[s + 1]; i += BLOCK) acc += in[i];
  part[threadIdx.x] = acc; __syncthreads();
  for (int st = BLOCK / 2; st > 0; st /= 2) {
    if (threadIdx.x < st) part[threadIdx.x] += part[threadIdx.x + st];
    __syncthreads(); }
  if (threadIdx.x == 0) out[s] = part[0];
}
"#;
const EXPR: &str = "segred<float, 256>";

fn host_reference(input: &[f32], offsets: &[i32]) -> Vec<f32> {
    offsets.windows(2).map(|w| input[w[0] as usize..w[1] as usize].iter().sum()).collect()
}

/// Run the kernel on the GPU; returns the per-segment sums and the kernel time.
fn run(dev: &Device, k: &cuabi::Kernel, input: &[f32], offsets: &[i32]) -> cuabi::Result<(Vec<f32>, f32)> {
    let segs = offsets.len() - 1;
    let res = MemoryResource::device_default(dev)?;
    let stream = Stream::new(dev)?;
    let mut bin = res.allocate(input.len() * 4, 0, Some(&stream))?;
    let mut boff = res.allocate(offsets.len() * 4, 0, Some(&stream))?;
    let bout = res.allocate(segs * 4, 0, Some(&stream))?;
    stream.synchronize()?; // the allocations are ordered on the stream; copies below are synchronous
    bin.copy_from_host(0, input)?;
    boff.copy_from_host(0, offsets)?;
    let pack = ArgPack::builder().arg(bin.arg()).arg(boff.arg()).arg(bout.arg()).arg(segs as i32).build()?;
    let (start, stop) = (Event::new(dev)?, Event::new(dev)?);
    start.record(&stream)?;
    // SAFETY: the test's kernels touch only the memory their packs name, which stays alive and unused by the host until the stream or device is synchronized below.
    unsafe { k.launch(&pack, &LaunchConfig::new(segs as u32, 256).on_stream(&stream)) }?;
    stop.record(&stream)?;
    stream.synchronize()?;
    let out = bout.to_vec::<f32>()?;
    let ms = start.elapsed_ms(&stop)?;
    for b in [bin, boff, bout] {
        b.free_async(&stream)?;
    }
    stream.synchronize()?;
    Ok((out, ms))
}

fn main() -> cuabi::Result<()> {
    println!("cuabi {}", cuabi::version());
    let mut prog = Program::new(KERNEL, Some("segred.cu"))?;
    let code = prog.compile(&ProgramOptions::new().name_expression(EXPR))?;
    let k = code.kernel(EXPR)?;
    println!("{EXPR} -> {} (cache hit: {})", prog.lowered_name(EXPR)?, prog.cache_hit());
    let r = k.resources()?;
    println!("resources (sm_{}): {} registers, {} B static shared, {} params ({} B)",
             r.arch, r.registers, r.shared_static_bytes, r.param_count, r.param_bytes);
    let arch = format!("sm_{}", r.arch);
    let occ = occupancy::offline::max_active_blocks(&arch, &r, 256, 0, None)?;
    println!("offline occupancy on {arch}, 256 threads: {} blocks/SM, {:.0}% ({} limits)",
             occ.active_blocks_per_sm, occ.occupancy * 100.0, occupancy::limiter_name(occ.limiter));
    let best = occupancy::offline::max_potential_block_size(&arch, &r, Some(&mut |bs| bs as usize * 4), 0, 0, None)?;
    println!("offline best block size with 4 B/thread of dynamic smem: {} (min grid {})", best.block_size, best.min_grid_size);

    let dev = match cuabi::device_count() {
        Ok(n) if n > 0 => Device::get(0)?,
        Ok(_) => { println!("no GPU: compiled and inspected only, launch skipped"); return Ok(()); }
        Err(e) => { println!("no CUDA driver ({}): compiled and inspected only, launch skipped", e.status_name()); return Ok(()); }
    };
    println!("GPU 0: {}", dev.properties()?.name());

    let small: Vec<f32> = (1..=12).map(|i| i as f32).collect();
    let (out, _) = run(&dev, &k, &small, &[0, 4, 8, 12])?;
    println!("[1..12] in 3 segments -> {out:?}");
    assert_eq!(out, vec![10.0, 26.0, 42.0], "small case wrong");

    let mut x = 0x2545F4914F6CDD1Du64;
    let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
    let mut off = vec![0i32];
    while *off.last().unwrap() < 4_000_000 {
        off.push((*off.last().unwrap() + (rnd() % 10_000) as i32).min(4_000_000));
    }
    let input: Vec<f32> = (0..4_000_000).map(|_| (rnd() % 1000) as f32 / 64.0).collect();
    let (out, ms) = run(&dev, &k, &input, &off)?;
    let want = host_reference(&input, &off);
    let bad = out.iter().zip(&want).filter(|(g, w)| (**g - **w).abs() > 1e-4 * w.abs().max(1.0)).count();
    println!("random: {} segments, {} elements, {ms:.3} ms, {bad} mismatches", want.len(), input.len());
    assert_eq!(bad, 0, "large case wrong");
    println!("OK");
    Ok(())
}
