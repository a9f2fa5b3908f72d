//! Reports opened in a real browser, headless Chromium (Debian's `chromium` package): the page
//! loads without a console message (a blocked fetch, a script error), every chart has the series
//! and points it should, read from the DOM the browser built, and a screenshot of each page is
//! kept in `target/tmp/browser/`. Without Chromium the tests are skipped with a notice; under
//! `CI=true` a missing Chromium fails them (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::report::{chart, repo, series, xtask};

/// The Chromium binary: `$CHROMIUM`, else `chromium` or `chromium-browser` on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|n| d.join(n)))
        .find(|p| p.is_file())
}

/// Chromium, or `None` after a loud notice (a failure under `CI=true`).
fn browser() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true and no Chromium: install Debian's `chromium` package (.ci/run does) or set CHROMIUM"
        );
        eprintln!(
            "NOTICE: browser test skipped: no Chromium found (install Debian's `chromium` package: \
             apt-get install -y chromium, or set CHROMIUM)"
        );
    }
    found
}

/// What the browser made of a page: the DOM after load, and the console messages it logged.
struct Loaded {
    dom: String,
    console: Vec<String>,
}

fn headless(chromium: &Path, profile: &Path) -> Command {
    let mut c = Command::new(chromium);
    c.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", profile.display()))
        // Nothing leaves the machine: a page that tries to fetch fails here too.
        .arg("--proxy-server=127.0.0.1:9")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    c
}

/// Load `page` (bounded: the browser is killed after 60 s) and return its DOM and console.
fn load(chromium: &Path, page: &Path, work: &Path) -> Loaded {
    let out = headless(chromium, &work.join("profile"))
        .args(["--enable-logging=stderr", "--v=0", "--timeout=30000", "--dump-dom"])
        .arg(url(page))
        .output()
        .expect("start chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    Loaded { dom: String::from_utf8_lossy(&out.stdout).into_owned(), console }
}

/// A screenshot of `page` at `png`, 1100 px wide.
fn screenshot(chromium: &Path, page: &Path, png: &Path, work: &Path) {
    let out = headless(chromium, &work.join("profile"))
        .args(["--window-size=1100,5000", "--timeout=30000"])
        .arg(format!("--screenshot={}", png.display()))
        .arg(url(page))
        .output()
        .expect("start chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(png).expect("the screenshot was written");
    assert!(bytes.starts_with(b"\x89PNG"), "{} is not a PNG", png.display());
}

fn url(page: &Path) -> String {
    format!("file://{}", page.canonicalize().unwrap().display())
}

/// The test's output directory (kept after the test: the screenshots).
fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every series of every chart in the DOM: the points its `data-points` states are the points
/// drawn (coordinate pairs of its polylines, or segments of its span path).
fn check_drawn(dom: &str) {
    for g in dom.split("<g class=\"series\"").skip(1) {
        let (tag, body) = g.split_once('>').unwrap();
        let body = body.split("</g>").next().unwrap();
        let stated: usize =
            tag.split("data-points=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        let lines: usize = body
            .split("points=\"")
            .skip(1)
            .map(|p| p.split('"').next().unwrap().split_whitespace().count())
            .sum();
        let spans = body
            .split(" d=\"")
            .nth(1)
            .map_or(0, |d| d.split('"').next().unwrap().matches('M').count());
        assert_eq!(lines + spans, stated, "series {tag}");
    }
}

/// Load the report at `page`: no console message, every series drawn as stated, a screenshot.
fn open(chromium: &Path, page: &Path, name: &str) -> String {
    let work = tempfile::tempdir().unwrap();
    let loaded = load(chromium, page, work.path());
    assert!(loaded.console.is_empty(), "{name}: console messages:\n{}", loaded.console.join("\n"));
    assert!(loaded.dom.contains("<svg"), "{name}: no chart in the DOM");
    check_drawn(&loaded.dom);
    screenshot(chromium, page, &out_dir().join(format!("{name}.png")), work.path());
    loaded.dom
}

#[test]
fn the_console_check_sees_a_blocked_fetch() {
    let Some(chromium) = browser() else { return };
    let work = tempfile::tempdir().unwrap();
    let page = work.path().join("bad.html");
    let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">";
    std::fs::write(&page, format!("<!DOCTYPE html><html><head>{csp}</head><body><img src=\"http://127.0.0.1:9/x.png\"></body></html>")).unwrap();
    let loaded = load(&chromium, &page, work.path());
    assert!(
        loaded.console.iter().any(|l| l.contains("Content Security Policy")),
        "{:?}",
        loaded.console
    );
}

#[test]
fn a_run_report_loads_with_failures_blanks_and_every_chart() {
    let Some(chromium) = browser() else { return };
    let r = repo("[profile.default.sim.faults]\nhttp_503 = 0.3\n");
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/a", "--report"]);
    assert!(o.code == 0 || o.code == 1, "{}", o.stderr);
    let s = infergate_model::Summary::read(&r.path().join("runs/a")).unwrap();
    let dom = open(&chromium, &r.path().join("runs/a/report.html"), "run");
    for id in ["ttft-cdf", "tpot-cdf", "itl-cdf", "e2e-cdf"] {
        let got = series(chart(&dom, id));
        assert_eq!(got.len(), 1, "{id}");
        assert!(got[0].1 > 0, "{id}: {got:?}");
    }
    assert_eq!(series(chart(&dom, "ttft-cdf"))[0].1 as u64, s.requests.ok);
    let tl = series(chart(&dom, "timeline"));
    assert_eq!(tl.iter().map(|t| t.1).collect::<Vec<_>>()[0] as u64, s.requests.total);
    // The failures are shown: a table row and a series over time.
    assert!(dom.contains("<td class=\"l\">http_503</td>"), "no failure row");
    assert_eq!(series(chart(&dom, "errors"))[0].0, "http_503");

    // Blanks are blanks: one output token leaves TPOT and ITL unmeasured.
    let o = xtask(r.path(), &["bench", "-q", "--out", "runs/b", "--max-tokens", "1", "--report"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dom = open(&chromium, &r.path().join("runs/b/report.html"), "run-blanks");
    for id in ["tpot-cdf", "itl-cdf"] {
        let c = chart(&dom, id);
        assert_eq!(series(c)[0].1, 0, "{id}");
        assert!(c.contains("was measured (blank, not zero)"), "{c}");
    }
    let row = dom.split("<td class=\"l\">TPOT</td>").nth(1).unwrap().split("</tr>").next().unwrap();
    assert_eq!(row.matches("class=\"blank\"").count(), 9, "{row}");
}

#[test]
fn sweep_and_comparison_reports_load_with_their_series() {
    let Some(chromium) = browser() else { return };
    let r = repo("[profile.default.slo]\nttft_ms = 1000\n");
    let o = xtask(
        r.path(),
        &["bench", "-q", "--out", "runs/s", "--sweep", "concurrency=1,4,16", "--report"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let dom = open(&chromium, &r.path().join("runs/s/report.html"), "sweep");
    assert_eq!(series(chart(&dom, "sweep-throughput")), vec![("output tok/s".to_string(), 3, 0)]);
    assert_eq!(series(chart(&dom, "sweep-latency")).len(), 3);
    assert!(series(chart(&dom, "sweep-latency")).iter().all(|s| s.1 == 3));
    assert_eq!(series(chart(&dom, "e2e-cdf")).len(), 3);
    assert!(chart(&dom, "sweep-latency").contains("knee: concurrency=16"));

    let c = crate::report::comparison_repo();
    let args =
        ["bench", "-q", "--out", "runs/c", "--compare-strategies", "serial,continuous", "--report"];
    let o = xtask(c.path(), &args);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let dom = open(&chromium, &c.path().join("runs/c/report.html"), "comparison");
    for id in ["ttft-cdf", "tpot-cdf", "itl-cdf", "e2e-cdf"] {
        let got = series(chart(&dom, id));
        assert_eq!(
            got.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
            ["serial", "continuous"],
            "{id}"
        );
        assert!(got.iter().all(|s| s.1 > 0), "{id}: {got:?}");
    }
}

#[test]
fn a_ten_thousand_request_report_is_small_and_loads() {
    let r = repo("");
    let o = xtask(
        r.path(),
        &[
            "bench",
            "-q",
            "--out",
            "runs/k",
            "--requests",
            "10000",
            "--concurrency",
            "128",
            "--max-tokens",
            "16",
            "--set",
            "workload.repeats=10000",
            "--report",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let s = infergate_model::Summary::read(&r.path().join("runs/k")).unwrap();
    assert_eq!(s.requests.total, 10_000);
    let page = r.path().join("runs/k/report.html");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 5 * 1024 * 1024, "report.html of 10,000 requests is {size} bytes");
    let html = std::fs::read_to_string(&page).unwrap();
    // The timeline is sampled, the CDFs thinned; the notes say so.
    let tl = chart(&html, "timeline");
    assert!(tl.contains("n = 10000 measured requests; every 5th drawn (2000 rows)"), "{tl}");
    assert!(chart(&html, "itl-cdf").contains("drawn at 400 evenly spaced ranks"));
    let Some(chromium) = browser() else { return };
    open(&chromium, &page, "run-10000");
}
