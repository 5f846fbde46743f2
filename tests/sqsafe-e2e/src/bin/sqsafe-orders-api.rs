//! A function behind an HTTP API, for `sqsafe local up`'s API gateway test (tests/e2e/local_api.rs): lambda_http
//! serving `POST /orders` behind sqsafe's idempotency layer, its records in `IDEMPOTENCY_TABLE`, each request's caller
//! the IAM principal API Gateway names, as a function made by `sqsafe new api` has it.

use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::routing::post;
use lambda_http::request::RequestContext;
use serde_json::{Value, json};
use sqsafe::api::IdempotencyLayer;
use sqsafe::layers::idempotency::{DynamoDbStore, Idempotency};

fn main() -> Result<(), sqsafe::Error> {
    sqsafe::runtime()?.block_on(async {
        let clients = sqsafe::Clients::from_env().await?;
        let table = clients.env.required("IDEMPOTENCY_TABLE")?;
        let store = DynamoDbStore::builder(clients.dynamodb.clone(), table).build()?;
        let idempotency = Idempotency::builder(store, "orders-api", 1).build()?;
        let app = Router::new()
            .route("/orders", post(create_order))
            .layer(IdempotencyLayer::new(idempotency, caller)?);
        lambda_http::run(app).await.map_err(sqsafe::Error::Runtime)
    })
}

/// A new id per order created: a replay carries the first one.
async fn create_order(Json(order): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = uuid::Uuid::new_v4().to_string();
    (
        StatusCode::CREATED,
        Json(json!({ "id": id, "order": order })),
    )
}

fn caller(parts: &Parts) -> Option<String> {
    let Some(RequestContext::ApiGatewayV2(context)) = parts.extensions.get::<RequestContext>()
    else {
        return None;
    };
    context.authorizer.as_ref()?.iam.as_ref()?.user_arn.clone()
}
