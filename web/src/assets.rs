//! The script and stylesheet, built into the binary (no CDN, no front-end build step).

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};

use crate::error::Error;

/// The page script: live index, forms, canary buttons, logs, charts.
pub const APP_JS: &str = include_str!("../assets/app.js");
/// The stylesheet.
pub const APP_CSS: &str = include_str!("../assets/app.css");

/// `GET /static/{file}`.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        _ => return Error::NotFound(format!("static file {file}")).into_response(),
    };
    ([(CONTENT_TYPE, content_type), (CACHE_CONTROL, "public, max-age=300")], body).into_response()
}
