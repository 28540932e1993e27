//! Headless Chromium through chromedriver, driven with fantoccini (a maintained W3C WebDriver
//! client), for the tests and the benchmark of the aggregator's web page: what they need of it
//! in a few helpers that find an element again when the page re-rendered it, and wait for a
//! condition with a deadline.
//!
//! `ZONEMESH_CHROMIUM` and `ZONEMESH_CHROMEDRIVER` name other binaries than `/usr/bin/chromium`
//! and `chromedriver`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use fantoccini::actions::{InputSource, MouseActions, PointerAction};
use fantoccini::elements::Element;
use fantoccini::wd::TimeoutConfiguration;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::{Process, wait_for};

/// The longest any one thing on a page may take to show.
pub const WAIT: Duration = Duration::from_secs(30);

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

/// A headless Chromium session through a chromedriver child process. [`Browser::close`] ends the
/// session (closing the browser); chromedriver is killed when the `Browser` drops.
#[derive(Debug)]
pub struct Browser {
    client: Client,
    _chromedriver: Process,
}

impl Browser {
    pub async fn start(tools: &Tools, log_dir: &Path) -> Result<Self> {
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
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": tools.chromium.as_str(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                         "--js-flags=--expose-gc"],
            }),
        );
        capabilities.insert(
            "timeouts".into(),
            json!({"implicit": 0, "pageLoad": 30_000, "script": 15_000}),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .context("new WebDriver session")?;
        Ok(Self {
            client,
            _chromedriver: chromedriver,
        })
    }

    /// Ends the session: the browser closes.
    pub async fn close(self) -> Result<()> {
        self.client.close().await.context("close the browser")
    }

    pub async fn goto(&self, url: &str) -> Result<()> {
        self.client
            .goto(url)
            .await
            .with_context(|| format!("go to {url}"))
    }

    pub async fn url(&self) -> Result<String> {
        Ok(self.client.current_url().await?.to_string())
    }

    pub async fn refresh(&self) -> Result<()> {
        Ok(self.client.refresh().await?)
    }

    /// How long an asynchronous script may run.
    pub async fn set_script_timeout(&self, timeout: Duration) -> Result<()> {
        let timeouts = TimeoutConfiguration::new(Some(timeout), None, None);
        Ok(self.client.update_timeouts(timeouts).await?)
    }

    /// Runs `f` on the element `css` selects, found again when the page re-rendered it meanwhile
    /// (the auto-refresh does, every 10 s).
    async fn on<T, F>(&self, css: &str, f: impl Fn(Element) -> F) -> Result<T>
    where
        F: Future<Output = Result<T, fantoccini::error::CmdError>>,
    {
        let mut tries = 0;
        loop {
            let element = self
                .client
                .find(Locator::Css(css))
                .await
                .with_context(|| format!("element {css}"))?;
            match f(element).await {
                Err(e) if tries < 3 && e.is_stale_element_reference() => tries += 1,
                other => return other.with_context(|| format!("element {css}")),
            }
        }
    }

    pub async fn text(&self, css: &str) -> Result<String> {
        self.on(css, |e| async move { e.text().await }).await
    }

    pub async fn attribute(&self, css: &str, name: &str) -> Result<Option<String>> {
        self.on(css, |e| async move { e.attr(name).await }).await
    }

    pub async fn displayed(&self, css: &str) -> Result<bool> {
        self.on(css, |e| async move { e.is_displayed().await })
            .await
    }

    pub async fn click(&self, css: &str) -> Result<()> {
        self.on(css, |e| async move { e.click().await }).await
    }

    /// Empties the input `css` selects and types `text` into it.
    pub async fn clear_and_type(&self, css: &str, text: &str) -> Result<()> {
        self.on(css, |e| async move {
            e.clear().await?;
            if !text.is_empty() {
                e.send_keys(text).await?;
            }
            Ok(())
        })
        .await
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; what it returns.
    pub async fn script(&self, script: &str, args: Value) -> Result<Value> {
        let args = match args {
            Value::Array(a) => a,
            other => vec![other],
        };
        Ok(self.client.execute(script, args).await?)
    }

    /// Runs `script` asynchronously: it ends by calling its last argument with what it returns.
    pub async fn script_async(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        Ok(self.client.execute_async(script, args).await?)
    }

    async fn move_mouse(&self, to: PointerAction) -> Result<()> {
        let actions = MouseActions::new("mouse".into()).then(to);
        Ok(self.client.perform_actions(actions).await?)
    }

    /// Moves the mouse over the centre of the element `css` selects.
    pub async fn hover(&self, css: &str) -> Result<()> {
        self.on(css, |element| async move {
            let to = PointerAction::MoveToElement {
                element,
                duration: Some(Duration::ZERO),
                x: 0.0,
                y: 0.0,
            };
            let actions = MouseActions::new("mouse".into()).then(to);
            self.client.perform_actions(actions).await
        })
        .await
    }

    /// Moves the mouse over the node matrix cell `src` → `dst` (drawn on a canvas: the page says
    /// where it is).
    pub async fn hover_cell(&self, src: &str, dst: &str) -> Result<()> {
        let at = self
            .script(
                "return window.zonemesh.cellCenter(arguments[0], arguments[1]);",
                json!([src, dst]),
            )
            .await?;
        let coordinate = |key: &str| {
            at[key]
                .as_f64()
                .with_context(|| format!("cell {src} → {dst}: {at}"))
        };
        self.move_mouse(PointerAction::MoveTo {
            duration: Some(Duration::ZERO),
            x: coordinate("x")?.round(),
            y: coordinate("y")?.round(),
        })
        .await
    }

    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let png = self.client.screenshot().await?;
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
            match self.script(script, args.clone()).await {
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
            self.text(css).await.ok().filter(|t| done(t.as_str()))
        })
        .await;
        match found {
            Ok(text) => Ok(text),
            Err(e) => {
                let shown = self.text(css).await.unwrap_or_default();
                Err(e).with_context(|| format!("{css} shows {shown:?}"))
            }
        }
    }
}
