//! The codec of every `zonemesh.v1` service: prost's, with the buffers sized for zonemesh's
//! streams rather than tonic's defaults.
//!
//! tonic gives each stream an encode and a decode buffer of `buffer_size` bytes (8 KiB by
//! default) that live as long as the stream. Each of the aggregator's ingest streams keeps both
//! for its life, so at 5,000 agents the defaults alone hold 80 MB. Starting at 1 KiB, a buffer
//! grows only when a message needs it. The decode buffer still grows by doubling and is never
//! shrunk, so it can end as large as from 8 KiB. At 5,000 nodes this codec took the aggregator's
//! paced RSS down by 15 and 41 MiB in two runs side by side (docs/BENCHMARKS.md). Answers of the
//! query API grow their buffer the same way, once per answer.
//!
//! A decode buffer must hold a whole message, and takes in the whole chunk of the body it reads.
//! An encoder puts the messages that are ready at once into one chunk until it holds
//! [`YIELD_THRESHOLD`] bytes (tonic's default: 32 KiB), so an agent that sends several reports at
//! once (a backlog after a reconnect) grows its stream's buffer on the aggregator to 32 KiB and
//! more, for good. Here an encoder yields after every message of a kilobyte or more, so that a
//! chunk is one report. At 5,000 nodes this and the engine's smaller path row together took the
//! paced RSS down by about 60 B a path; the two were not measured apart (docs/BENCHMARKS.md,
//! "Smaller decode buffers, a smaller path row, and reports split in parts").

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::ProstCodec;

/// Bytes each stream's encode and decode buffers start with (tonic's default: 8 KiB).
pub const BUFFER_BYTES: usize = 1024;

/// Bytes an encoder writes before it yields its frame to the runtime (tonic's default: 32 KiB).
pub const YIELD_THRESHOLD: usize = 1024;

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
