//! `skiff-hello --port P`: a bare hyper server that reads each request body and answers a
//! constant V2-shaped JSON. It is the HTTP ceiling of this machine for the server benchmark:
//! the same hyper stack as `skiff-server`, with no JSON parsing and no model.

use std::convert::Infallible;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

const ANSWER: &str = r#"{"model_name":"iris","id":"1","outputs":[{"name":"label","datatype":"INT64","shape":[1],"data":[1]},{"name":"probabilities","datatype":"FP32","shape":[1,3],"data":[0.001117679,0.80217284,0.19670942]}]}"#;

#[derive(Parser)]
struct Args {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let _ = request.into_body().collect().await;
    let mut response = Response::new(Full::new(Bytes::from_static(ANSWER.as_bytes())));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    Ok(response)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let connection = builder.serve_connection(TokioIo::new(stream), service_fn(answer)).into_owned();
        tokio::spawn(connection);
    }
}
