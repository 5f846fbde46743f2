//! The body of every answer the layer gives: the handler's own body streamed through untouched (an unguarded
//! request, a released key, or a guarded answer past what is stored, after the part already read), or a body the
//! layer holds whole (its own answers, a replay, a guarded answer read to its end under the cap).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use crate::BoxError;

/// The body of every answer of an [`IdempotencyService`](super::IdempotencyService): the handler's own body streamed
/// through untouched, or a body the layer holds whole (its own answers, a replay, a guarded answer read under the
/// cap). Never collects what it streams.
pub struct ApiBody<B> {
    kind: Kind<B>,
}

enum Kind<B> {
    Held {
        data: Option<Bytes>,
        trailers: Option<HeaderMap>,
    },
    Streamed {
        /// What the layer already read of the handler's body, sent first.
        prefix: Option<Bytes>,
        rest: Pin<Box<B>>,
    },
}

impl<B> ApiBody<B> {
    /// A body held whole.
    pub(super) fn full(data: Bytes) -> Self {
        Self::held(data, None)
    }

    pub(super) fn held(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        Self {
            kind: Kind::Held {
                data: (!data.is_empty()).then_some(data),
                trailers,
            },
        }
    }

    /// The handler's body, after `prefix` (what was read of it already).
    pub(super) fn streamed(prefix: Bytes, rest: Pin<Box<B>>) -> Self {
        Self {
            kind: Kind::Streamed {
                prefix: (!prefix.is_empty()).then_some(prefix),
                rest,
            },
        }
    }
}

impl<B> std::fmt::Debug for ApiBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Held { data, .. } => f
                .debug_struct("ApiBody::Held")
                .field("bytes", &data.as_ref().map_or(0, Bytes::len))
                .finish_non_exhaustive(),
            Kind::Streamed { .. } => f.debug_struct("ApiBody::Streamed").finish_non_exhaustive(),
        }
    }
}

impl<B> Body for ApiBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // Unpin: the handler's body is boxed.
        match &mut self.get_mut().kind {
            Kind::Held { data, trailers } => {
                if let Some(data) = data.take() {
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))))
            }
            Kind::Streamed { prefix, rest } => {
                if let Some(prefix) = prefix.take() {
                    return Poll::Ready(Some(Ok(Frame::data(prefix))));
                }
                rest.as_mut()
                    .poll_frame(cx)
                    .map(|frame| frame.map(|f| f.map_err(Into::into)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Held { data, trailers } => data.is_none() && trailers.is_none(),
            Kind::Streamed { prefix, rest } => prefix.is_none() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Held { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Streamed { prefix, rest } => {
                let before = prefix.as_ref().map_or(0, |p| p.len() as u64);
                let hint = rest.size_hint();
                let mut sum = SizeHint::new();
                sum.set_lower(hint.lower().saturating_add(before));
                if let Some(upper) = hint.upper() {
                    sum.set_upper(upper.saturating_add(before));
                }
                sum
            }
        }
    }
}
