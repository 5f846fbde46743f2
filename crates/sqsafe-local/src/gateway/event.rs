//! A request as API Gateway's HTTP API hands it to Lambda (payload format 2.0), and the function's answer back as
//! an HTTP response.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, Response, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// The caller of a request that names none: what `requestContext.authorizer.iam.userArn` says locally.
pub const LOCAL_CALLER: &str = "arn:aws:iam::000000000000:user/local";

/// A request header that names its caller (an IAM ARN) locally, in place of a SigV4 signature. Not passed on.
pub const CALLER_HEADER: &str = "x-sqsafe-local-caller";

/// What [`event_of`] reads.
pub struct RequestParts<'a> {
    /// Method, URI, headers.
    pub parts: &'a Parts,
    /// The body.
    pub body: &'a [u8],
    /// The matched route's key.
    pub route_key: &'a str,
    /// Its path parameters.
    pub path_parameters: &'a BTreeMap<String, String>,
    /// `requestContext.requestId`.
    pub request_id: &'a str,
    /// When it came.
    pub now: SystemTime,
}

/// The payload format 2.0 event of a request.
pub fn event_of(request: &RequestParts<'_>) -> Value {
    let parts = request.parts;
    let mut headers: Map<String, Value> = Map::new();
    let mut cookies: Vec<Value> = Vec::new();
    for (name, value) in &parts.headers {
        let Ok(value) = value.to_str() else { continue };
        if name == CALLER_HEADER {
            continue;
        }
        if name == "cookie" {
            cookies.extend(value.split(';').map(|c| Value::from(c.trim())));
            continue;
        }
        // Repeated headers: one value, joined with commas, as API Gateway does.
        match headers.get_mut(name.as_str()) {
            Some(Value::String(joined)) => {
                joined.push(',');
                joined.push_str(value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), value.into());
            }
        }
    }
    let caller = parts
        .headers
        .get(CALLER_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .unwrap_or(LOCAL_CALLER);
    let raw_query = parts.uri.query().unwrap_or_default();
    let mut query: Map<String, Value> = Map::new();
    for pair in raw_query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        let (name, value) = (decode(name), decode(value));
        match query.get_mut(&name) {
            Some(Value::String(joined)) => {
                joined.push(',');
                joined.push_str(&value);
            }
            _ => {
                query.insert(name, value.into());
            }
        }
    }
    let (body, base64) = match std::str::from_utf8(request.body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (STANDARD.encode(request.body), true),
    };
    let epoch_ms = request
        .now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let user_agent = headers.get("user-agent").cloned().unwrap_or_default();
    let mut event = json!({
        "version": "2.0",
        "routeKey": request.route_key,
        "rawPath": parts.uri.path(),
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "authorizer": {
                "iam": {
                    "accessKey": "LOCAL",
                    "accountId": "000000000000",
                    "callerId": "LOCAL",
                    "userArn": caller,
                    "userId": "LOCAL",
                }
            },
            "domainName": "127.0.0.1",
            "domainPrefix": "127",
            "http": {
                "method": parts.method.as_str(),
                "path": parts.uri.path(),
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": user_agent,
            },
            "requestId": request.request_id,
            "routeKey": request.route_key,
            "stage": "$default",
            "timeEpoch": epoch_ms,
        },
        "isBase64Encoded": base64,
    });
    if !cookies.is_empty() {
        event["cookies"] = cookies.into();
    }
    if !query.is_empty() {
        event["queryStringParameters"] = query.into();
    }
    if !request.path_parameters.is_empty() {
        event["pathParameters"] = json!(request.path_parameters);
    }
    if !request.body.is_empty() {
        event["body"] = body.into();
    }
    event
}

/// The function's answer as the HTTP response: `statusCode`, `headers`, `cookies` (each a `set-cookie`), `body`
/// (base64 when `isBase64Encoded`). An answer without `statusCode` is a `200` whose body is the answer as JSON, as
/// API Gateway takes it.
///
/// # Errors
///
/// A status, a header or a base64 body that is not valid.
pub fn answer_of(answer: Value) -> Result<Response<Body>, String> {
    let Some(status) = answer.get("statusCode") else {
        return Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Body::from(answer.to_string()))
            .map_err(|e| e.to_string());
    };
    let status = status
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .ok_or_else(|| format!("statusCode {status} is not an HTTP status"))?;
    let mut response = Response::builder().status(status);
    let headers = response
        .headers_mut()
        .ok_or("the response could not be built")?;
    for (name, value) in answer
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let value = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        headers.append(
            HeaderName::try_from(name.as_str()).map_err(|e| format!("header {name}: {e}"))?,
            HeaderValue::try_from(value).map_err(|e| format!("header {name}: {e}"))?,
        );
    }
    for cookie in answer
        .get("cookies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        headers.append(
            "set-cookie",
            HeaderValue::try_from(cookie).map_err(|e| format!("cookie: {e}"))?,
        );
    }
    let body = answer
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let body = if answer.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        STANDARD
            .decode(body)
            .map_err(|e| format!("body: not base64: {e}"))?
    } else {
        body.as_bytes().to_vec()
    };
    response.body(Body::from(body)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;
    use http_body_util::BodyExt;

    fn parts(request: Request<()>) -> Parts {
        request.into_parts().0
    }

    fn event(parts: &Parts, body: &[u8]) -> Value {
        event_of(&RequestParts {
            parts,
            body,
            route_key: "ANY /{proxy+}",
            path_parameters: &BTreeMap::from([("proxy".to_owned(), "orders".to_owned())]),
            request_id: "r-1",
            now: UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123),
        })
    }

    #[test]
    fn a_request_becomes_the_format_2_event_with_its_caller() {
        let p = parts(
            Request::post("/orders?a=1&a=2&b=x%20y")
                .header("Idempotency-Key", "k-1")
                .header("x-tag", "one")
                .header("x-tag", "two")
                .header("cookie", "s=1; t=2")
                .header(CALLER_HEADER, "arn:aws:iam::111122223333:user/alice")
                .body(())
                .expect("request"),
        );
        let e = event(&p, b"{\"sku\":\"s\"}");
        assert_eq!(e["version"], "2.0");
        assert_eq!(e["routeKey"], "ANY /{proxy+}");
        assert_eq!(e["rawPath"], "/orders");
        assert_eq!(e["rawQueryString"], "a=1&a=2&b=x%20y");
        assert_eq!(e["queryStringParameters"], json!({"a": "1,2", "b": "x y"}));
        assert_eq!(e["headers"]["idempotency-key"], "k-1");
        assert_eq!(e["headers"]["x-tag"], "one,two");
        assert!(
            e["headers"].get(CALLER_HEADER).is_none(),
            "the local caller header is not passed on"
        );
        assert!(e["headers"].get("cookie").is_none());
        assert_eq!(e["cookies"], json!(["s=1", "t=2"]));
        assert_eq!(e["pathParameters"], json!({"proxy": "orders"}));
        assert_eq!(e["body"], "{\"sku\":\"s\"}");
        assert_eq!(e["isBase64Encoded"], false);
        let context = &e["requestContext"];
        assert_eq!(context["http"]["method"], "POST");
        assert_eq!(
            context["authorizer"]["iam"]["userArn"],
            "arn:aws:iam::111122223333:user/alice"
        );
        assert_eq!(context["timeEpoch"], 1_700_000_000_123_u64);
        assert_eq!(context["requestId"], "r-1");
    }

    #[test]
    fn without_a_caller_header_the_caller_is_local_and_a_binary_body_is_base64() {
        let p = parts(Request::post("/x").body(()).expect("request"));
        let e = event(&p, &[0xff, 0x00]);
        assert_eq!(
            e["requestContext"]["authorizer"]["iam"]["userArn"],
            LOCAL_CALLER
        );
        assert_eq!(
            (e["body"].as_str(), e["isBase64Encoded"].as_bool()),
            (Some("/wA="), Some(true))
        );
        let empty = event(&p, b"");
        assert!(empty.get("body").is_none());
    }

    async fn bytes(response: Response<Body>) -> Vec<u8> {
        response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn an_answer_becomes_the_response_byte_for_byte() {
        let response = answer_of(json!({
            "statusCode": 201,
            "headers": {"content-type": "application/json", "idempotent-replayed": "true"},
            "cookies": ["a=1", "b=2"],
            "body": "{\"id\":\"o-1\"}",
            "isBase64Encoded": false,
        }))
        .expect("answer");
        assert_eq!(response.status(), StatusCode::CREATED);
        assert_eq!(response.headers()["idempotent-replayed"], "true");
        assert_eq!(response.headers().get_all("set-cookie").iter().count(), 2);
        assert_eq!(bytes(response).await, b"{\"id\":\"o-1\"}");
        let binary = answer_of(json!({"statusCode": 200, "body": "/wA=", "isBase64Encoded": true}))
            .expect("answer");
        assert_eq!(bytes(binary).await, [0xff, 0x00]);
        let inferred = answer_of(json!({"ok": true})).expect("answer");
        assert_eq!(inferred.status(), StatusCode::OK);
        assert_eq!(bytes(inferred).await, b"{\"ok\":true}");
    }

    #[test]
    fn an_answer_that_is_not_a_response_is_an_error() {
        for bad in [
            json!({"statusCode": "201"}),
            json!({"statusCode": 99}),
            json!({"statusCode": 200, "headers": {"bad name": "x"}}),
            json!({"statusCode": 200, "body": "%%", "isBase64Encoded": true}),
        ] {
            assert!(answer_of(bad.clone()).is_err(), "{bad}");
        }
    }
}
