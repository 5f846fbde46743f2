//! `charge-payment-changes`: charge-payment fed by a payment requests table's DynamoDB stream (the fault-injection
//! suite's DynamoDB-stream consumer; an example, built only with the `fault-injection` feature, that template.yaml
//! does not deploy).

#[global_allocator]
static ALLOCATOR: sqsafe::Allocator = sqsafe::Allocator;

fn main() -> Result<(), sqsafe::Error> {
    sqsafe::main::<charge_payment::ChargePaymentChanges>()
}
