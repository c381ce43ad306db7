//! Server-rendered pages (maud escapes every value). Each page is whole without the script; the
//! script adds live updates, the forms' submission (with the CSRF header), logs and charts.

pub mod create;
pub mod detail;
pub mod index;
pub mod layout;

use std::time::SystemTime;

/// `42s`, `5m`, `3h`, `2d`, as kubectl prints ages.
pub fn age(created: Option<SystemTime>) -> String {
    let Some(seconds) = created.and_then(|c| SystemTime::now().duration_since(c).ok()).map(|d| d.as_secs()) else {
        return "-".into();
    };
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86400),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn ages_read_like_kubectls() {
        let ago = |s| Some(SystemTime::now() - Duration::from_secs(s));
        assert_eq!(age(ago(5)), "5s");
        assert_eq!(age(ago(600)), "10m");
        assert_eq!(age(ago(7300)), "2h");
        assert_eq!(age(ago(200_000)), "2d");
        assert_eq!(age(None), "-");
    }
}
