//! Aligned I/O buffers, allocated once per worker (one per request slot). O_DIRECT needs the
//! memory aligned to the device's DMA alignment; 4 KiB covers every common device.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::rng::Rng;

const HUGE_PAGE: usize = 2 << 20;

pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// The buffer is plain memory owned by one worker; moving it to the worker thread is safe.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        // Large regions get 2 MiB alignment and a transparent-huge-page hint: the kernel's copy to
        // or from a 1 MiB request then walks one TLB entry instead of 256.
        let (len, align) = if len >= HUGE_PAGE / 2 {
            (len.div_ceil(HUGE_PAGE) * HUGE_PAGE, align.max(HUGE_PAGE))
        } else {
            (len.max(1), align.max(1))
        };
        let layout = Layout::from_size_align(len, align).expect("valid buffer layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        if len >= HUGE_PAGE {
            // SAFETY: advisory only, on memory we own; failure (THP disabled) is harmless.
            unsafe { libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        }
        AlignedBuf { ptr, layout }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len()) }
    }

    /// Fill with pseudo-random bytes so compressing or deduplicating storage cannot shortcut writes.
    pub fn fill_random(&mut self, seed: u64) {
        let mut rng = Rng::new(seed);
        for chunk in self.as_mut_slice().chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_filled() {
        let mut b = AlignedBuf::new(8192 + 3, 4096);
        assert_eq!(b.as_mut_ptr() as usize % 4096, 0);
        b.fill_random(1);
        assert!(b.as_mut_slice().iter().filter(|&&x| x == 0).count() < 200);
    }
}
