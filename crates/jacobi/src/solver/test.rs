use super::asynchronous::{pack_echo, HaloSource, Inbox};
use super::*;
use crate::geometry::{Dims, ProcGrid};
use crate::problem::Problem;
use chan_core::Mode;
use chan_threads::World;

/// The one face of a block with one neighbour.
fn neighbour_face(f: &Field) -> Face {
    let g = f.geometry();
    Face::ALL
        .into_iter()
        .find(|fc| g.neighbours[fc.index()].is_some())
        .unwrap()
}

/// Rank 0 sends its face stamped 7 with echo 5 over a multisplit halo channel of mode `M`;
/// rank 1 takes it into `field`. Rank 1's inbox after the take (rank 0's: untouched).
fn send_with_echo<C: Context, M: Mode>(ctx: &mut C, field: &mut Field) -> Inbox
where
    Channel<C::Backend, M>: HaloSource,
{
    let face = neighbour_face(field);
    let specs = halo::specs(field, &[face], 0, 2, 1).unwrap();
    let mut chans = ctx.open::<M>(&specs).unwrap();
    let mut ib = Inbox::default();
    if ctx.rank() == 0 {
        chans[0].set_iteration(7);
        let f = &*field;
        chans[0]
            .try_send_with(|b| pack_echo(f, face, 5, b))
            .unwrap();
    } else {
        while !chans[0]
            .take(
                field,
                face,
                &mut ib,
                RacyRead::Landed,
                &mut Parts::default(),
            )
            .unwrap()
        {}
    }
    ctx.barrier().unwrap();
    close_all(chans).unwrap();
    ib
}

/// Multisplitting's wire format over real channels (threads backend): the face one rank
/// packs with an echo arrives in the other's halo value for value, as a plain unpack of
/// the same face writes it, and the receiver's inbox reads back the sender's stamp and
/// echo, in async and racy mode.
#[test]
fn a_multisplit_face_carries_its_echo() {
    let plan = Plan::split(Dims::new(12, 5, 4), ProcGrid(Dims::new(2, 1, 1))).unwrap();
    // A rank's block, its values distinct.
    let block = |r: usize| {
        let mut f = Field::new(&plan.geometry(r), &Problem::Laplace { offset: 0.0 });
        for (i, v) in f.iterate_mut().iter_mut().enumerate() {
            *v = 0.5 + i as f64;
        }
        f
    };
    let sender = block(0);
    let mut face = vec![0.0; sender.face_len(neighbour_face(&sender))];
    sender.pack(neighbour_face(&sender), &mut face);
    let mut want = block(1);
    want.unpack(neighbour_face(&want), &face);
    for mode in ["async", "racy"] {
        let outs = World::new(2).unwrap().run(|ctx| {
            let mut field = block(ctx.rank());
            let ib = match mode {
                "async" => send_with_echo::<_, Async>(ctx, &mut field),
                _ => send_with_echo::<_, Racy>(ctx, &mut field),
            };
            (ib, field)
        });
        let (ib, field) = &outs[1];
        assert_eq!(field.iterate(), want.iterate(), "{mode}: the halo");
        assert_eq!((ib.stamp, ib.echo), (7, 5), "{mode}: stamp and echo");
    }
}
