//! S3 and GCS through `object_store`: a prefix lists every object under it as a folder (path
//! segments, so `iris` never takes `iris-v2`); a URI that names one object gives that object.

use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt, RetryConfig};

use super::{CONNECT_TIMEOUT, Object, READ_TIMEOUT, Remote};
use crate::env::{GcsEnv, S3Env};
use crate::error::{Error, Result};
use crate::guard::{self, Reach};

/// A bucket and a prefix in it.
pub struct ObjectRemote {
    uri: String,
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

fn client_options(insecure: bool) -> ClientOptions {
    ClientOptions::new()
        .with_allow_http(true)
        .with_allow_invalid_certificates(insecure)
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout_disabled()
}

/// The client's own retries of a failed request (a range's retries are the downloader's).
fn retry() -> RetryConfig {
    RetryConfig { max_retries: 2, retry_timeout: READ_TIMEOUT, ..RetryConfig::default() }
}

impl ObjectRemote {
    /// `s3://bucket/prefix` with `env`'s endpoint and keys (anonymous without keys).
    pub fn s3(uri: &str, bucket: &str, prefix: String, env: &S3Env, reach: Reach) -> Result<ObjectRemote> {
        let mut builder = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(&env.region)
            .with_client_options(client_options(env.insecure))
            .with_retry(retry());
        if let Some(endpoint) = &env.endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(true);
        }
        builder = match &env.keys {
            Some((id, secret)) => builder.with_access_key_id(id).with_secret_access_key(&secret.0),
            None => builder.with_skip_signature(true),
        };
        if let Some(token) = &env.session_token {
            builder = builder.with_token(&token.0);
        }
        if reach == Reach::NotTheNode {
            builder = builder.with_http_connector(guard::Connector { insecure: env.insecure });
        }
        let store = builder.build().map_err(|e| Error::Config(format!("{uri}: S3 settings: {e}")))?;
        Ok(ObjectRemote { uri: crate::uri::redact(uri), store: Arc::new(store), prefix })
    }

    /// `gs://bucket/prefix` with `env`'s key file or emulator (anonymous without a key file).
    pub fn gcs(uri: &str, bucket: &str, prefix: String, env: &GcsEnv, reach: Reach) -> Result<ObjectRemote> {
        let mut builder = object_store::gcp::GoogleCloudStorageBuilder::new()
            .with_bucket_name(bucket)
            .with_client_options(client_options(false))
            .with_retry(retry());
        if let Some(emulator) = &env.emulator {
            builder = builder.with_base_url(emulator.trim_end_matches('/'));
        }
        builder = match &env.credentials_file {
            Some(file) => builder.with_service_account_path(file),
            None => builder.with_skip_signature(true),
        };
        if reach == Reach::NotTheNode {
            builder = builder.with_http_connector(guard::Connector { insecure: false });
        }
        let store = builder.build().map_err(|e| Error::Config(format!("{uri}: GCS settings: {e}")))?;
        Ok(ObjectRemote { uri: crate::uri::redact(uri), store: Arc::new(store), prefix })
    }

    fn object(&self, meta: &ObjectMeta, relative: String) -> Object {
        let version = meta.e_tag.clone().or_else(|| meta.version.clone()).unwrap_or_else(|| {
            // Without an ETag, the time and size of the last write tell versions apart.
            format!("{}:{}", meta.last_modified.timestamp_nanos_opt().unwrap_or_default(), meta.size)
        });
        Object {
            source: meta.location.to_string(),
            path: relative,
            size: Some(meta.size),
            version: Some(version),
            ranged: true,
        }
    }

    fn error(&self, error: object_store::Error) -> Error {
        let uri = self.uri.clone();
        if let Some(refused) = guard::refused_in(&error) {
            return Error::Unreachable { uri, host: refused.host.clone() };
        }
        match error {
            object_store::Error::NotFound { source, .. } => Error::NotFound { uri, cause: chain(source.as_ref()) },
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => {
                Error::Denied { uri, cause: chain(source.as_ref()) }
            }
            other => {
                let cause = chain(&other);
                // object_store reports some refusals as generic errors carrying the status.
                if cause.contains("403 Forbidden") || cause.contains("401 Unauthorized") {
                    Error::Denied { uri, cause }
                } else if cause.contains("404 Not Found") || cause.contains("NoSuchBucket") {
                    Error::NotFound { uri, cause }
                } else {
                    Error::Transfer { uri, cause }
                }
            }
        }
    }
}

/// An error and its sources as one tidied line ([`crate::error::tidy`]).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    crate::error::tidy(&text)
}

#[async_trait]
impl Remote for ObjectRemote {
    fn uri(&self) -> &str {
        &self.uri
    }

    async fn list(&self) -> Result<Vec<Object>> {
        let prefix = Path::from(self.prefix.as_str());
        let listed: Vec<ObjectMeta> = self
            .store
            .list((!self.prefix.is_empty()).then_some(&prefix))
            .try_collect()
            .await
            .map_err(|e| self.error(e))?;
        let skip = if self.prefix.is_empty() { 0 } else { self.prefix.len() + 1 };
        let mut objects: Vec<Object> = listed
            .iter()
            .filter(|meta| !meta.location.as_ref().ends_with('/'))
            .map(|meta| self.object(meta, meta.location.as_ref()[skip..].to_owned()))
            .collect();
        if objects.is_empty() && !self.prefix.is_empty() {
            // The URI may name one object rather than a folder.
            let meta = self.store.head(&prefix).await.map_err(|e| self.error(e))?;
            objects.push(self.object(&meta, super::base_name(&self.prefix).to_owned()));
        }
        if objects.is_empty() {
            return Err(Error::NotFound { uri: self.uri.clone(), cause: "the bucket holds no object".into() });
        }
        Ok(objects)
    }

    async fn read(&self, object: &Object, range: Option<Range<u64>>) -> Result<BoxStream<'static, Result<Bytes>>> {
        let options = GetOptions { range: range.map(GetRange::Bounded), ..GetOptions::default() };
        let location = Path::from(object.source.as_str());
        let result = self.store.get_opts(&location, options).await.map_err(|e| self.error(e))?;
        let uri = self.uri.clone();
        Ok(result.into_stream().map_err(move |e| Error::Transfer { uri: uri.clone(), cause: chain(&e) }).boxed())
    }
}
