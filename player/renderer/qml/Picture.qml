// One still picture, centred on black and fitted to the stage. The picture comes decoded at the
// stage's size from the renderer's image provider (image://pdn/...), decoded off the GUI thread.
import QtQuick

Item {
    id: picture

    // Its fade (Fade.qml), started and ended by its region's layer stack (layerstack.py).
    readonly property QtObject fade: fader

    property alias source: image.source
    readonly property bool ready: image.status === Image.Ready

    anchors.fill: parent
    visible: false

    Bars {
        inner: Qt.rect((picture.width - image.paintedWidth) / 2,
                       (picture.height - image.paintedHeight) / 2,
                       image.paintedWidth, image.paintedHeight)
    }
    Image {
        id: image
        anchors.fill: parent
        fillMode: Image.PreserveAspectFit
        cache: false
        smooth: true
        asynchronous: false
    }
    Fade { id: fader; target: picture }
}
