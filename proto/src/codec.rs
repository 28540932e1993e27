//! The codec of every `zonemesh.v1` service: prost's, with the buffers sized for zonemesh's
//! streams rather than tonic's defaults.
//!
//! tonic gives each stream an encode and a decode buffer of `buffer_size` bytes (8 KiB by
//! default) that live as long as the stream. The decode buffer grows when a message does not
//! fit, by doubling from its size (Vec's growth), and is never shrunk: an agent's report of a
//! few KB, with the next one's first bytes behind it, took each of the aggregator's ingest
//! streams to 32 KB (163 MB over 5,000 streams in the heap profile of docs/BENCHMARKS.md).
//! Starting small, a buffer grows to what the stream's messages need and no further: growth
//! from a small buffer is to the size asked for, since doubling 1 KiB asks less. Answers of the
//! query API grow their buffer the same way, once per answer.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::ProstCodec;

/// Bytes each stream's encode and decode buffers start with (tonic's default: 8 KiB).
pub const BUFFER_BYTES: usize = 1024;

/// Bytes an encoder writes before it yields to the runtime (tonic's default).
pub const YIELD_THRESHOLD: usize = 32 * 1024;

/// [`ProstCodec`] with [`BUFFER_BYTES`] buffers; the generated clients and servers use it.
#[derive(Debug, Clone, Copy)]
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_BYTES, YIELD_THRESHOLD)
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = <ProstCodec<T, U> as Codec>::Decoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
