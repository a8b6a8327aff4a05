//! Every generated struct's size and field offsets agree with the library's
//! own (cuabi_struct_size / cuabi_struct_field_offset), and every declared
//! entry point links.
use cuabi_sys::*;
use std::ffi::CString;

fn lib_size(name: &str) -> usize {
    let c = CString::new(name).unwrap();
    let mut out = 0usize;
    let st = unsafe { cuabi_struct_size(&mut out, c.as_ptr()) };
    assert_eq!(st, CUABI_SUCCESS, "cuabi_struct_size({name}) failed: the library does not know this struct");
    out
}

fn lib_offset(name: &str, field: &str) -> usize {
    let (c, f) = (CString::new(name).unwrap(), CString::new(field).unwrap());
    let mut out = 0usize;
    let st = unsafe { cuabi_struct_field_offset(&mut out, c.as_ptr(), f.as_ptr()) };
    assert_eq!(st, CUABI_SUCCESS, "cuabi_struct_field_offset({name}.{field}) failed");
    out
}

#[test]
fn struct_layouts_match_library() {
    assert!(!LAYOUTS.is_empty());
    let mut fields = 0;
    for (name, size, offsets) in LAYOUTS {
        assert_eq!(*size, lib_size(name), "size of {name}");
        for (field, off) in offsets.iter() {
            assert_eq!(*off, lib_offset(name, field), "offset of {name}.{field}");
            fields += 1;
        }
    }
    println!("checked {} structs, {} fields", LAYOUTS.len(), fields);
}

#[test]
fn unknown_struct_is_not_found() {
    let c = CString::new("cuabi_no_such_struct").unwrap();
    let mut out = 0usize;
    let st = unsafe { cuabi_struct_size(&mut out, c.as_ptr()) };
    assert_eq!(st, CUABI_ERROR_NOT_FOUND);
}

#[test]
fn every_function_links() {
    let addrs = function_addresses();
    assert!(addrs.len() > 10);
    for (name, addr) in addrs {
        assert_ne!(addr, 0, "{name} has no address");
    }
}

#[test]
fn status_names_agree_with_library() {
    for v in 0..64 {
        let st = cuabi_status(v);
        let lib = unsafe { std::ffi::CStr::from_ptr(cuabi_status_name(st)) };
        match st.name() {
            Some(n) => assert_eq!(n, lib.to_str().unwrap()),
            None => assert!(!lib.to_bytes().is_empty()),
        }
    }
}

#[test]
fn versioned_init_fills_version() {
    let mut o = cuabi_stream_options::default();
    assert_eq!(unsafe { cuabi_stream_options_init(&mut o, CUABI_STREAM_OPTIONS_VERSION) }, CUABI_SUCCESS);
    assert_eq!(o.version, CUABI_STREAM_OPTIONS_VERSION);
    assert_eq!(unsafe { cuabi_stream_options_init(&mut o, 0) }, CUABI_ERROR_INVALID_VERSION);
}
