//! A W3C WebDriver client for headless Chromium through chromedriver, for the tests and the
//! benchmark of the aggregator's web page: start a session, load a page, run scripts in it, click,
//! type, hover and take screenshots.
//!
//! `ZONEMESH_CHROMIUM` and `ZONEMESH_CHROMEDRIVER` name other binaries than `/usr/bin/chromium`
//! and `chromedriver`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

use crate::{Process, wait_for};

/// The longest any one thing on a page may take to show.
pub const WAIT: Duration = Duration::from_secs(30);

/// The key of a web element reference in WebDriver's JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Chromium and chromedriver.
#[derive(Debug)]
pub struct Tools {
    chromium: String,
    chromedriver: String,
}

impl Tools {
    /// Both binaries when they run; otherwise `None` after saying the test is skipped — except
    /// under CI, which must not skip it.
    pub fn find() -> Option<Self> {
        let chromium =
            std::env::var("ZONEMESH_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let chromedriver =
            std::env::var("ZONEMESH_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
        let install = "apt-get install chromium chromium-driver";
        if !(crate::tool_available(&chromium, &["--version"], install)
            && crate::tool_available(&chromedriver, &["--version"], install))
        {
            return None;
        }
        Some(Self {
            chromium,
            chromedriver,
        })
    }
}

/// A headless Chromium session through a chromedriver child process; the session is deleted (the
/// browser closed) and chromedriver killed when dropped.
#[derive(Debug)]
pub struct Browser {
    driver: SocketAddr,
    session: String,
    _chromedriver: Process,
}

impl Browser {
    pub fn start(tools: &Tools, log_dir: &Path) -> Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut command = Command::new(&tools.chromedriver);
        command.arg(format!("--port={port}"));
        let chromedriver = Process::spawn(command, "chromedriver", log_dir)?;
        chromedriver
            .line(
                "ChromeDriver was started successfully",
                Duration::from_secs(20),
            )
            .context("chromedriver did not start")?;
        let driver = SocketAddr::from(([127, 0, 0, 1], port));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": tools.chromium.as_str(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                         "--js-flags=--expose-gc"],
            },
            "timeouts": {"implicit": 0, "pageLoad": 30_000, "script": 15_000},
        }}});
        let (status, answer) = http(driver, "POST", "/session", Some(&capabilities))?;
        ensure!(status == 200, "new WebDriver session: {status} {answer}");
        let session = answer["value"]["sessionId"]
            .as_str()
            .with_context(|| format!("no sessionId in {answer}"))?
            .to_owned();
        Ok(Self {
            driver,
            session,
            _chromedriver: chromedriver,
        })
    }

    /// A command of this session (`path` after `/session/{id}`); its `value`.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let full = format!("/session/{}{path}", self.session);
        let (status, mut answer) = http(self.driver, method, &full, body.as_ref())?;
        let value = answer.get_mut("value").map(Value::take).unwrap_or_default();
        if status != 200 {
            bail!(
                "WebDriver {method} {path}: {status} {}: {}",
                value["error"].as_str().unwrap_or("?"),
                value["message"].as_str().unwrap_or("")
            );
        }
        Ok(value)
    }

    pub fn goto(&self, url: &str) -> Result<()> {
        self.call("POST", "/url", Some(json!({ "url": url })))?;
        Ok(())
    }

    pub fn url(&self) -> Result<String> {
        Ok(self
            .call("GET", "/url", None)?
            .as_str()
            .context("the URL")?
            .to_owned())
    }

    pub fn refresh(&self) -> Result<()> {
        self.call("POST", "/refresh", Some(json!({})))?;
        Ok(())
    }

    pub fn find(&self, css: &str) -> Result<String> {
        let found = self.call(
            "POST",
            "/element",
            Some(json!({ "using": "css selector", "value": css })),
        )?;
        Ok(found[ELEMENT]
            .as_str()
            .with_context(|| format!("element {css}: {found}"))?
            .to_owned())
    }

    /// Runs `f` on the element `css` selects, found again when the page re-rendered it meanwhile
    /// (the auto-refresh does, every 10 s).
    pub fn on<T>(&self, css: &str, f: impl Fn(&str) -> Result<T>) -> Result<T> {
        let mut tries = 0;
        loop {
            let element = self.find(css)?;
            match f(&element) {
                Err(e) if tries < 3 && format!("{e:#}").contains("stale element reference") => {
                    tries += 1;
                }
                other => return other.with_context(|| format!("element {css}")),
            }
        }
    }

    pub fn text(&self, css: &str) -> Result<String> {
        self.on(css, |e| {
            let text = self.call("GET", &format!("/element/{e}/text"), None)?;
            Ok(text.as_str().unwrap_or_default().to_owned())
        })
    }

    pub fn attribute(&self, css: &str, name: &str) -> Result<Option<String>> {
        self.on(css, |e| {
            let value = self.call("GET", &format!("/element/{e}/attribute/{name}"), None)?;
            Ok(value.as_str().map(str::to_owned))
        })
    }

    pub fn displayed(&self, css: &str) -> Result<bool> {
        self.on(css, |e| {
            let shown = self.call("GET", &format!("/element/{e}/displayed"), None)?;
            Ok(shown.as_bool() == Some(true))
        })
    }

    pub fn click(&self, css: &str) -> Result<()> {
        self.on(css, |e| {
            self.call("POST", &format!("/element/{e}/click"), Some(json!({})))?;
            Ok(())
        })
    }

    /// Empties the input `css` selects and types `text` into it.
    pub fn clear_and_type(&self, css: &str, text: &str) -> Result<()> {
        self.on(css, |e| {
            self.call("POST", &format!("/element/{e}/clear"), Some(json!({})))?;
            if !text.is_empty() {
                self.call(
                    "POST",
                    &format!("/element/{e}/value"),
                    Some(json!({ "text": text })),
                )?;
            }
            Ok(())
        })
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; what it returns.
    pub fn script(&self, script: &str, args: Value) -> Result<Value> {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Moves the mouse to `(x, y)` from `origin` ("viewport", or an element reference: from its
    /// centre).
    pub fn move_mouse(&self, origin: Value, x: i64, y: i64) -> Result<()> {
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [{"type": "pointerMove", "duration": 0, "origin": origin, "x": x, "y": y}],
        }]});
        self.call("POST", "/actions", Some(actions))?;
        Ok(())
    }

    /// Moves the mouse over the centre of the element `css` selects.
    pub fn hover(&self, css: &str) -> Result<()> {
        self.on(css, |e| {
            let mut origin = serde_json::Map::new();
            origin.insert(ELEMENT.to_owned(), Value::from(e));
            self.move_mouse(Value::Object(origin), 0, 0)
        })
    }

    /// Moves the mouse over the node matrix cell `src` → `dst` (drawn on a canvas: the page says
    /// where it is).
    pub fn hover_cell(&self, src: &str, dst: &str) -> Result<()> {
        let at = self.script(
            "return window.zonemesh.cellCenter(arguments[0], arguments[1]);",
            json!([src, dst]),
        )?;
        let (x, y) = (
            at["x"]
                .as_f64()
                .with_context(|| format!("cell {src} → {dst}: {at}"))?,
            at["y"]
                .as_f64()
                .with_context(|| format!("cell {src} → {dst}: {at}"))?,
        );
        self.move_mouse(json!("viewport"), x.round() as i64, y.round() as i64)
    }

    pub fn screenshot(&self) -> Result<Vec<u8>> {
        let data = self.call("GET", "/screenshot", None)?;
        let png = base64_decode(data.as_str().context("screenshot data")?)?;
        ensure!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "the screenshot is no PNG"
        );
        Ok(png)
    }

    /// Runs `script` with `args` until it returns something other than null (at most [`WAIT`]).
    pub async fn until(&self, what: &str, script: &str, args: Value) -> Result<Value> {
        let last_error = std::sync::Mutex::new(String::new());
        let found = wait_for(what, WAIT, || async {
            match self.script(script, args.clone()) {
                Ok(v) if !v.is_null() => Some(v),
                Ok(_) => None,
                Err(e) => {
                    *last_error.lock().unwrap_or_else(|p| p.into_inner()) = format!("{e:#}");
                    None
                }
            }
        })
        .await;
        found.with_context(|| {
            let last = last_error.lock().unwrap_or_else(|p| p.into_inner());
            format!("last script error: {:?}", *last)
        })
    }

    /// Reads the text of the element `css` selects until `done` holds for it (at most [`WAIT`]).
    pub async fn until_text(
        &self,
        css: &str,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> Result<String> {
        let found = wait_for(what, WAIT, || async {
            self.text(css).ok().filter(|t| done(t.as_str()))
        })
        .await;
        found.with_context(|| format!("{css} shows {:?}", self.text(css).unwrap_or_default()))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closes the browser; chromedriver itself is killed right after (its `Process` drops).
        let _ = http(
            self.driver,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
}

/// One HTTP/1.1 request to `addr` with an optional JSON body; the status and the JSON answer
/// (null when empty). chromedriver answers with a Content-Length and keeps the connection open
/// even when asked to close it, so the body is read by its length.
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connect to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(90)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if method != "GET" && method != "DELETE" {
        request += &format!(
            "Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n",
            body.len()
        );
    }
    request += "\r\n";
    request += &body;
    stream.write_all(request.as_bytes())?;

    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{method} {path}: status line {line:?}"))?;
    let mut length = None;
    loop {
        line.clear();
        ensure!(
            reader.read_line(&mut line)? > 0,
            "{method} {path}: the answer ended in its headers"
        );
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let name = name.trim();
            ensure!(
                !name.eq_ignore_ascii_case("transfer-encoding"),
                "{method} {path}: a {header:?} answer (not supported here)"
            );
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.trim().parse::<usize>()?);
            }
        }
    }
    let mut bytes = Vec::new();
    match length {
        Some(n) => {
            bytes.resize(n, 0);
            reader.read_exact(&mut bytes)?;
        }
        None => {
            reader.read_to_end(&mut bytes)?;
        }
    }
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{method} {path}: {}", String::from_utf8_lossy(&bytes)))?
    };
    Ok((status, value))
}

/// Standard base64 (the screenshot); padding and line breaks are skipped.
fn base64_decode(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let sextet = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\r' | b'\n' => continue,
            _ => bail!("not base64: {:?}", char::from(c)),
        };
        buffer = (buffer << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Ok(out)
}
