//! Fatbins without a GPU (issue 16): a program and a linker make one for
//! several architectures; it answers per architecture.
use cuabi::{sys, Linker, LinkerOptions, ObjectCode, Program, ProgramOptions};

const SRC: &str = r#"
extern "C" __global__ void scale(float *x, float f) { x[threadIdx.x] *= f; }
"#;

fn fatbin(archs: &str) -> Option<ObjectCode> {
    let mut p = Program::new(SRC, Some("k.cu")).unwrap();
    let mut o = ProgramOptions::new().arch(archs).output(sys::CUABI_CODE_FATBIN);
    o.cache = false;
    match p.compile(&o) {
        Ok(code) => Some(code),
        // Neither nvFatbin nor the fatbinary tool on this machine.
        Err(e) if e.status == sys::CUABI_ERROR_NOT_SUPPORTED => { eprintln!("skipped: {e}"); None }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn program_fatbin_per_architecture() {
    let Some(code) = fatbin("sm_80,sm_90,compute_90") else { return };
    assert_eq!(code.code_type(), sys::CUABI_CODE_FATBIN);
    assert_eq!(code.fatbin_archs().unwrap(), vec![80, 90]);
    assert_eq!(code.fatbin_images().unwrap(),
               vec![(cuabi::CodeType::Cubin, 80), (cuabi::CodeType::Cubin, 90), (cuabi::CodeType::Ptx, 90)]);
    let packer = code.fatbin_packer().unwrap();
    assert!(packer == "nvfatbin" || packer == "fatbinary", "{packer}");
    for (arch, want) in [("sm_80", 80), ("sm_90", 90), ("sm_100", 100)] {
        let r = code.kernel_resources("scale", Some(arch)).unwrap();
        assert_eq!(r.arch, want);
        assert!(r.registers > 0);
    }
    let cubin = code.extract("sm_80").unwrap();
    assert_eq!(cubin.arch(), 80);
    let ptx = code.extract("compute_90").unwrap();
    assert_eq!(ptx.code_type(), sys::CUABI_CODE_PTX);
    assert_eq!(code.extract("sm_75").unwrap_err().status, sys::CUABI_ERROR_NOT_FOUND);
    let packed = ObjectCode::pack_fatbin(&[&cubin, &ptx]).unwrap();
    assert_eq!(packed.fatbin_archs().unwrap(), vec![80]);
    assert_eq!(cubin.fatbin_archs().unwrap_err().status, sys::CUABI_ERROR_INVALID_ARGUMENT);
}

#[test]
fn linker_fatbin() {
    let Some(_) = fatbin("sm_80") else { return };
    let mut p = Program::new(SRC, None).unwrap();
    let mut o = ProgramOptions::new().arch("compute_80").output(sys::CUABI_CODE_PTX);
    o.cache = false;
    let ptx = p.compile(&o).unwrap();
    let lo = LinkerOptions::new().arch("sm_80,sm_90");
    let mut l = Linker::new(&lo).unwrap();
    l.add_objcode(&ptx).unwrap();
    let fat = l.complete(sys::CUABI_CODE_FATBIN).unwrap();
    assert_eq!(fat.fatbin_archs().unwrap(), vec![80, 90]);
}
