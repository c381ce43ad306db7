//! The models web app's edits of a manifest file in a real `skiff up`, against a user who edits
//! the same folder: a save made while the app edits is never lost (the edit applies on top of it,
//! or answers 409 naming the file); a symbolic link is edited at its target and stays a link; an
//! edit that would break a rule of the folder (its size limit) is refused naming the rule, and the
//! file and the service stay as they were.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use http::{Method, StatusCode};
use serde_json::{Value, json};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// A user's editor as a process: for each line `N MODE SIZE` on its stdin it takes the file as it
/// was when the line was sent (the SIZE bytes that follow the line), adds `# user save N`
/// on top, waits 0 to 4 ms and saves it, as editors do, by a rename (`rename`, no lock) or in
/// place (`inplace`, as a careful writer: it locks the file with `flock` and checks that the file
/// it locked is still the path's, else opens it again); then prints `saved N`.
const EDITOR: &str = r##"
import fcntl, os, random, sys, time
path = sys.argv[1]
while line := sys.stdin.readline():
    n, mode, size = line.split()
    base = sys.stdin.read(int(size))
    text = f"# user save {n}\n" + base
    time.sleep(random.random() * 0.004)
    if mode == "rename":
        tmp = path + ".swp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, path)
    else:
        while True:
            f = open(path, "r+")
            fcntl.flock(f, fcntl.LOCK_EX)
            if os.fstat(f.fileno()).st_ino == os.stat(path).st_ino:
                break
            f.close()
        f.seek(0); f.truncate(); f.write(text); f.close()
    print(f"saved {n}", flush=True)
"##;

fn listed(status: &Value, name: &str) -> bool {
    status["services"].as_array().is_some_and(|s| s.iter().any(|s| s["name"] == name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_save_made_while_the_app_edits_is_never_lost() {
    let dir = folder(&["iris"]);
    let path = dir.path().join("iris.yaml");
    std::fs::write(&path, manifest("iris", "iris", "minReplicas: 0")).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris listed", Duration::from_secs(30), |s| listed(s, "iris")).await;
    let app = WebApp::open(up.admin).await;
    let mut editor = Command::new("python3")
        .args(["-c", EDITOR])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_editor = editor.stdin.take().unwrap();
    let mut from_editor = BufReader::new(editor.stdout.take().unwrap()).lines();

    let rounds = 60;
    let (mut on_top, mut refused, mut saved_after) = (0, 0, 0);
    for n in 0..rounds {
        let base = std::fs::read_to_string(&path).unwrap();
        let mode = if n % 2 == 0 { "rename" } else { "inplace" };
        write!(to_editor, "{n} {mode} {}\n{base}", base.len()).unwrap();
        to_editor.flush().unwrap();
        let percent = 10 + n % 50;
        let reply = app.call(Method::PATCH, "iris", &json!({ "canaryTrafficPercent": percent })).await;
        assert_eq!(from_editor.next().unwrap().unwrap(), format!("saved {n}"));
        let now = std::fs::read_to_string(&path).unwrap();
        let body = String::from_utf8_lossy(&reply.body);
        assert!(
            now.contains(&format!("# user save {n}\n")),
            "round {n} ({mode}): the user's save was lost; the edit answered {} {body}; the file:\n{now}",
            reply.status
        );
        let edited = now.contains(&format!("canaryTrafficPercent: {percent}\n"));
        match reply.status {
            StatusCode::OK if edited => on_top += 1,
            StatusCode::OK => saved_after += 1,
            StatusCode::CONFLICT => {
                assert!(body.contains("iris.yaml: the file changed"), "round {n}: {body}");
                refused += 1;
            }
            // The folder read the file in the middle of an in-place save (empty): no such service then.
            StatusCode::NOT_FOUND if mode == "inplace" => refused += 1,
            other => panic!("round {n}: the edit answered {other} {body}"),
        }
    }
    eprintln!(
        "{rounds} races of a save and an edit: {on_top} edits applied on top of the save, {saved_after} saves \
         made after the edit, {refused} edits refused with 409; no save lost"
    );
    drop(to_editor);
    editor.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_manifest_is_edited_at_its_target_and_stays_a_link() {
    let dir = folder(&["iris"]);
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let target = dir.path().join("src/iris.txt");
    std::fs::write(&target, manifest("iris", "iris", "minReplicas: 0")).unwrap();
    let link = dir.path().join("iris.yaml");
    std::os::unix::fs::symlink("src/iris.txt", &link).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris listed", Duration::from_secs(30), |s| listed(s, "iris")).await;
    let app = WebApp::open(up.admin).await;

    let reply = app.call(Method::PATCH, "iris", &json!({ "canaryTrafficPercent": 20 })).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "iris.yaml is still a link");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("src/iris.txt"));
    let edited = std::fs::read_to_string(&target).unwrap();
    assert!(edited.contains("canaryTrafficPercent: 20\n"), "{edited}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_past_the_size_limit_is_refused_and_the_service_stays() {
    let dir = folder(&["iris"]);
    // Just under the folder's 1.5 MiB limit: one more field takes it past.
    let limit = 1536 * 1024;
    let big = manifest("big", "iris", "minReplicas: 0");
    let padding = format!("#{}\n", "x".repeat(limit - big.len() - 12));
    let big = format!("{padding}{big}");
    std::fs::write(dir.path().join("big.yaml"), &big).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("big listed", Duration::from_secs(30), |s| listed(s, "big")).await;
    let app = WebApp::open(up.admin).await;

    let reply = app.call(Method::PATCH, "big", &json!({ "canaryTrafficPercent": 10 })).await;
    let body = String::from_utf8_lossy(&reply.body);
    eprintln!("an edit past the limit: {} {body}", reply.status);
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("big.yaml: ") && body.contains("is more than a manifest may hold (1572864 bytes"), "{body}");
    assert_eq!(std::fs::read_to_string(dir.path().join("big.yaml")).unwrap(), big, "the file is as it was");
    let status = up.status().await;
    assert!(listed(&status, "big"), "the service is still served: {status:#}");
    assert_eq!(app.call(Method::GET, "big", &Value::Null).await.status, StatusCode::OK);
}
