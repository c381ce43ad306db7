//! A Hugging Face Hub repository (`hf://org/repo[:revision]`), through the Hub's HTTP layout at
//! `HF_ENDPOINT`: the revision's commit and files from `GET /api/models/{repo}/revision/{rev}`,
//! each file from `/{repo}/resolve/{commit}/{file}` (the commit, so every file is of one
//! version), with `HF_TOKEN` as a bearer token.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use serde::Deserialize;

use super::http::{body, describe};
use super::{Object, Remote, http_client, status_error, transfer_error};
use crate::env::HfEnv;
use crate::error::{Error, Result};
use crate::guard::Reach;

/// A repository at a revision.
pub struct HfRemote {
    uri: String,
    repo: String,
    revision: String,
    env: HfEnv,
    client: reqwest::Client,
}

#[derive(Deserialize)]
struct RevisionInfo {
    sha: String,
    #[serde(default)]
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
    size: Option<u64>,
}

impl HfRemote {
    /// `repo` at `revision` on the Hub of `env`.
    pub fn new(uri: &str, repo: String, revision: String, env: &HfEnv, reach: Reach) -> Result<HfRemote> {
        Ok(HfRemote { uri: crate::uri::redact(uri), repo, revision, env: env.clone(), client: http_client(reach)? })
    }

    fn get(&self, url: &str) -> reqwest::RequestBuilder {
        self.authorized(self.client.get(url))
    }

    /// `request` with the token, when there is one.
    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.env.token {
            Some(token) => request.bearer_auth(&token.0),
            None => request,
        }
    }

    fn file_url(&self, commit: &str, file: &str) -> String {
        format!("{}/{}/resolve/{commit}/{file}", self.env.endpoint, self.repo)
    }
}

/// A file name from the Hub that could leave the model's folder.
fn unsafe_name(name: &str) -> bool {
    name.starts_with('/') || name.split('/').any(|part| part.is_empty() || part == "." || part == "..")
}

#[async_trait]
impl Remote for HfRemote {
    fn uri(&self) -> &str {
        &self.uri
    }

    async fn list(&self) -> Result<Vec<Object>> {
        let url = format!("{}/api/models/{}/revision/{}?blobs=true", self.env.endpoint, self.repo, self.revision);
        let response = self.get(&url).send().await.map_err(|e| transfer_error(&self.uri, &e))?;
        if !response.status().is_success() {
            return Err(status_error(&self.uri, response.status(), "the repository's revision"));
        }
        let body = response.bytes().await.map_err(|e| transfer_error(&self.uri, &e))?;
        let info: RevisionInfo = serde_json::from_slice(&body).map_err(|e| Error::Transfer {
            uri: self.uri.clone(),
            cause: format!("the Hub's answer is not a revision: {e}"),
        })?;
        if info.siblings.is_empty() {
            return Err(Error::NotFound { uri: self.uri.clone(), cause: "the repository holds no file".into() });
        }
        let mut objects = Vec::with_capacity(info.siblings.len());
        for sibling in info.siblings {
            if unsafe_name(&sibling.rfilename) {
                return Err(Error::Transfer {
                    uri: self.uri.clone(),
                    cause: format!("the Hub named a file {:?} outside the repository", sibling.rfilename),
                });
            }
            let source = self.file_url(&info.sha, &sibling.rfilename);
            let (size, ranged) = match sibling.size {
                Some(size) => (Some(size), true),
                None => {
                    let response = self
                        .authorized(self.client.head(&source))
                        .send()
                        .await
                        .map_err(|e| transfer_error(&self.uri, &e))?;
                    if !response.status().is_success() {
                        return Err(status_error(&self.uri, response.status(), &sibling.rfilename));
                    }
                    let (size, _, ranged) = describe(response.headers());
                    (size, ranged)
                }
            };
            objects.push(Object {
                source,
                path: sibling.rfilename,
                size,
                version: Some(info.sha.clone()),
                ranged: ranged && size.is_some(),
            });
        }
        Ok(objects)
    }

    async fn read(&self, object: &Object, range: Option<Range<u64>>) -> Result<BoxStream<'static, Result<Bytes>>> {
        body(&self.uri, self.get(&object.source), range).await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_that_leave_the_folder_are_unsafe() {
        for name in ["../x", "/etc/passwd", "a//b", "a/./b", "a/../../b"] {
            assert!(super::unsafe_name(name), "{name}");
        }
        assert!(!super::unsafe_name("onnx/model.onnx"));
    }
}
